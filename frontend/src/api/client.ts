// The API client: types generated from docs/openapi/v1.yaml (`npm run gen:api`), so a field the API drops
// breaks `tsc -b`. Same origin, session cookie; unsafe methods carry Django's CSRF token (cookie `csrftoken`,
// header X-CSRFToken), which GET /api/v1/session/ sets.
import createClient, { type Middleware } from 'openapi-fetch'
import type { components, paths } from './schema'

export type Schemas = components['schemas']
export type Instance = Schemas['InstanceOutput']
export type Project = Schemas['ProjectOutput']
export type Organization = Schemas['OrganizationOutput']
export type SshKey = Schemas['SshKeyOutput']
export type Flavor = Schemas['FlavorOutput']
export type Image = Schemas['ImageOutput']
export type Session = Schemas['SessionOutput']
export type Operation = Schemas['OperationOutput']
export type Problem = Schemas['Problem']
export type Vpc = Schemas['VpcOutput']
export type Subnet = Schemas['SubnetOutput']
export type SecurityGroup = Schemas['SecurityGroupOutput']
export type SecurityGroupRule = Schemas['SecurityGroupRuleOutput']
export type PublicIp = Schemas['PublicIpOutput']
export type Port = Schemas['PortOutput']
export type IbPartition = Schemas['IbPartitionOutput']
export type IbPartitionMember = Schemas['IbPartitionMemberOutput']
export type Invoice = Schemas['InvoiceOutput']
export type InvoiceLine = Schemas['InvoiceLineOutput']
export type InvoicePreview = Schemas['InvoicePreviewOutput']
export type UsageRecord = Schemas['UsageRecordOutput']
export type Lease = Schemas['LeaseOutput']
export type ApiToken = Schemas['ApiTokenOutput']
export type ApiTokenCreated = Schemas['ApiTokenCreated']
export type Membership = Schemas['MembershipOutput']
export type Invitation = Schemas['InvitationOutput']
export type AuditEvent = Schemas['AuditEventOutput']
export type Cluster = Schemas['ClusterOutput']
export type Me = Schemas['MeOutput']
export type FleetSummary = Schemas['FleetSummaryOutput']
export type FleetHost = Schemas['FleetHostOutput']
export type FleetGpu = Schemas['FleetGpuOutput']
export type Host = Schemas['HostOutput']
export type Gpu = Schemas['GpuOutput']

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])

export function csrfToken(cookie: string = document.cookie): string | null {
  for (const part of cookie.split(';')) {
    const [name, ...rest] = part.trim().split('=')
    if (name === 'csrftoken') return decodeURIComponent(rest.join('='))
  }
  return null
}

/**
 * Unsafe requests carry the CSRF cookie's token. With no cookie (cleared, or expired with the session while the
 * console still shows a screen) it first asks GET /api/v1/session/ for one, so the request (a sign-in again after
 * the session ended, above all) is not refused with "CSRF cookie not set".
 */
export const csrfMiddleware: Middleware = {
  async onRequest({ request }) {
    if (!SAFE.has(request.method)) {
      let token = csrfToken()
      if (!token) {
        await globalThis.fetch(new Request(new URL('/api/v1/session/', request.url), {
          credentials: 'same-origin',
          headers: { Accept: 'application/json' },
        }))
        token = csrfToken()
      }
      if (token) request.headers.set('X-CSRFToken', token)
    }
    return request
  },
}

/** Conflict codes that name no field in `errors` but are about one: the form marks that field with the detail. */
export const CODE_FIELDS: Record<string, string> = { name_taken: 'name', slug_taken: 'slug' }

/** A problem+json answer (RFC 9457 with the API's `code` and per-field `errors`; a `CODE_FIELDS` code adds its field). */
export class ApiError extends Error {
  status: number
  code: string
  detail: string
  errors: Record<string, string[]>
  /** The problem's `request_id` (else the answer's `X-Request-ID` header), for the person to quote to support. */
  requestId: string | null
  body: Record<string, unknown>

  constructor(status: number, body: Partial<Problem> & Record<string, unknown>, headerRequestId: string | null = null) {
    const detail = typeof body.detail === 'string' && body.detail ? body.detail : `The server answered ${status}.`
    super(detail)
    this.status = status
    this.code = typeof body.code === 'string' ? body.code : 'error'
    this.detail = detail
    this.errors = flattenErrors(body.errors)
    const field = CODE_FIELDS[this.code]
    if (field && !this.errors[field]) this.errors[field] = [detail]
    this.requestId = typeof body.request_id === 'string' && body.request_id ? body.request_id : headerRequestId || null
    this.body = body
  }
}

/** `{field: ["msg"], nested: {inner: ["msg"]}}` → `{field: [...], "nested.inner": [...]}`. */
export function flattenErrors(errors: unknown, prefix = ''): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  if (!errors || typeof errors !== 'object') return out
  for (const [key, value] of Object.entries(errors as Record<string, unknown>)) {
    const name = prefix ? `${prefix}.${key}` : key
    if (typeof value === 'string') out[name] = [value]
    else if (Array.isArray(value) && value.every((v) => typeof v === 'string')) out[name] = value as string[]
    else Object.assign(out, flattenErrors(value, name))
  }
  return out
}

export const api = createClient<paths>({
  baseUrl: typeof window === 'undefined' ? 'http://localhost' : window.location.origin,
  credentials: 'same-origin',
  headers: { Accept: 'application/json' },
  fetch: (request: Request) => globalThis.fetch(request), // looked up per call (tests stub it)
})
api.use(csrfMiddleware)

type Result<T> = { data?: T; error?: unknown; response: Response }

/** The data of a successful answer, or an ApiError carrying the problem document. */
export async function unwrap<T>(call: Promise<Result<T>>): Promise<T> {
  const { data, error, response } = await call
  if (!response.ok || error !== undefined) {
    const body = error && typeof error === 'object' ? (error as Record<string, unknown>) : {}
    throw new ApiError(response.status, body, response.headers?.get('X-Request-ID') ?? null)
  }
  return data as T
}

/** The `cursor` query value of a paginated answer's `next`/`previous` URL. */
export function cursorOf(url: string | null | undefined): string | undefined {
  if (!url) return undefined
  return new URL(url, 'http://localhost').searchParams.get('cursor') ?? undefined
}
