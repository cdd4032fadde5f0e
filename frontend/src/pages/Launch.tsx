import {
  Alert, Anchor, Badge, Button, Checkbox, Group, Loader, MultiSelect, NumberInput, Paper, Radio, SegmentedControl, Select, Stack,
  Stepper, Text, TextInput, Title,
} from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useMemo, useState } from 'react'
import { Link, useNavigate, useSearchParams } from 'react-router'
import { ApiError, api, unwrap, type Flavor, type Instance, type Lease, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { QuotaTable } from '../components/QuotaTable'
import { WriteButton } from '../components/WriteButton'
import { money } from '../hooks/billing'
import { gpuLabel, imageLabel, sizeLabel, useFlavors, useImages } from '../hooks/catalog'
import { isSignedOut } from '../queryClient'
import { quotaAmount, quotaFits, quotaLabel, quotaScope } from '../quota'

type Market = 'on_demand' | 'spot' | 'lease'
/** Separate instances (`count` of them, each placed on its own) or one cluster of `count` nodes (placed together). */
type Shape = 'instances' | 'cluster'
type Check = Schemas['PlacementCheckOutput']

export interface LaunchForm {
  gpuModel: string | null
  flavor: string | null
  name: string
  image: string | null
  sshKeys: string[]
  subnet: string | null
  securityGroups: string[]
  ibPartition: string | null
  market: Market
  lease: string | null
  shape: Shape
  count: number
}

/** The most separate instances one launch makes (one request each); a cluster takes up to 256 nodes. */
export const MAX_COUNT = 20
export const MAX_NODES = 256

const EMPTY: LaunchForm = {
  gpuModel: null, flavor: null, name: '', image: null, sshKeys: [], subnet: null, securityGroups: [], ibPartition: null, market: 'on_demand',
  lease: null, shape: 'instances', count: 1,
}

/** Where the wizard keeps its choices so that a reload in the middle keeps them: this browser tab's sessionStorage,
 * one entry per project. Cleared when the launch succeeds or the person cancels. */
export const draftKey = (project: string) => `gpucloud.launch.${project}`

const MARKETS: Market[] = ['on_demand', 'spot', 'lease']
const SHAPES: Shape[] = ['instances', 'cluster']

/** The choices kept for `project` (each field of the right type, else its empty value), or the empty form. */
export function loadDraft(project: string): LaunchForm {
  let saved: unknown
  try {
    saved = JSON.parse(window.sessionStorage.getItem(draftKey(project)) ?? 'null')
  } catch {
    saved = null
  }
  if (!saved || typeof saved !== 'object') return EMPTY
  const s = saved as Record<string, unknown>
  const text = (v: unknown) => (typeof v === 'string' ? v : null)
  const texts = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [])
  return {
    gpuModel: text(s.gpuModel), flavor: text(s.flavor), name: text(s.name) ?? '', image: text(s.image), sshKeys: texts(s.sshKeys),
    subnet: text(s.subnet), securityGroups: texts(s.securityGroups), ibPartition: text(s.ibPartition),
    market: MARKETS.find((m) => m === s.market) ?? EMPTY.market, lease: text(s.lease),
    shape: SHAPES.find((m) => m === s.shape) ?? EMPTY.shape, count: typeof s.count === 'number' ? s.count : EMPTY.count,
  }
}

/** Keep `form` for `project` (nothing chosen: nothing kept, nor the launch's Idempotency-Key). */
export function saveDraft(project: string, form: LaunchForm | null) {
  try {
    if (!form || JSON.stringify(form) === JSON.stringify(EMPTY)) {
      window.sessionStorage.removeItem(draftKey(project))
      window.sessionStorage.removeItem(`${draftKey(project)}.key`)
    } else window.sessionStorage.setItem(draftKey(project), JSON.stringify(form))
  } catch {
    // storage full or disabled: the wizard works as before, without surviving a reload
  }
}

/** The Idempotency-Key of the launch `request` (the request's JSON) in `project`: the one kept in the tab's
 * sessionStorage while the request is the same, so a retry after a reload (the answer to the first click lost)
 * replays that launch instead of making a second one; a new key once the request changes. */
export function launchKey(project: string, request: string): string {
  const where = `${draftKey(project)}.key`
  try {
    const kept = JSON.parse(window.sessionStorage.getItem(where) ?? 'null') as { request?: unknown, key?: unknown } | null
    if (kept && kept.request === request && typeof kept.key === 'string') return kept.key
    const key = crypto.randomUUID()
    window.sessionStorage.setItem(where, JSON.stringify({ request, key }))
    return key
  } catch {
    return crypto.randomUUID()
  }
}

/** Which wizard step holds each field the API may name in `errors`. */
const FIELD_STEP: Record<string, number> = {
  flavor: 0, name: 1, image: 1, ssh_keys: 1, subnet_id: 2, security_group_ids: 2, ib_partition_id: 2, project: 0,
  size: 2, market: 2, lease: 2,
}

/** Why `name` cannot name an instance, or null (empty: null, the field is required). The name becomes the guest's
 * hostname: a lower-case DNS label of at most 63 characters (RFC 1035 §2.3.4, RFC 1123 §2.1), the rule the API
 * checks (400 `validation_error` on `name`), told here as it is typed rather than at the review. */
export function hostnameProblem(name: string): string | null {
  if (!name) return null
  if (name.length > 63) return 'At most 63 characters (counting the -N a count adds)'
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(name)) {
    return 'Only lower-case letters, digits and hyphens, starting and ending with a letter or digit'
  }
  return null
}

/** The names of the instances the form launches: its name alone for one, `<name>-1` … `<name>-<count>` for more. */
export function instanceNames(form: Pick<LaunchForm, 'name' | 'count' | 'shape'>): string[] {
  const name = form.name.trim()
  if (form.shape === 'cluster' || form.count <= 1) return [name]
  return Array.from({ length: form.count }, (_, i) => `${name}-${i + 1}`)
}

/** The body of POST /clusters/ (and of its dry run, POST /clusters/check/): the instance's, with `size`. */
export function clusterCreateBody(form: LaunchForm, project: string): Schemas['ClusterCreateInputRequest'] {
  const { queue: _queue, ...rest } = createBody(form, project)
  return { ...rest, image: form.image ?? '', size: form.count, queue: false }
}

/** The body of POST /instance-requests/ (spot, or inside a lease) for the instance named `name`. */
export function requestBody(form: LaunchForm, project: string, name: string): Schemas['InstanceRequestInputRequest'] {
  return {
    project, name, flavor: form.flavor ?? '', image: form.image ?? '', ssh_keys: form.sshKeys, user_data: '',
    market: form.market, queue_timeout_s: 0, ...(form.market === 'lease' ? { lease: form.lease } : {}),
  }
}

/** "finetune (8 × H100-SXM5-80GB GPUs, until …)": a lease as the wizard offers it. */
export function leaseLabel(lease: Lease): string {
  const what = lease.kind === 'mig' ? `MIG ${lease.mig_profile}` : lease.kind === 'hosts' ? 'hosts' : lease.kind === 'shares' ? 'shares' : 'GPUs'
  return `${lease.name} (${lease.count} × ${lease.gpu_model} ${what}, until ${new Date(lease.end).toLocaleString()})`
}

/** The instances a multi-instance launch made before one was refused (the refusal is the error). */
export class PartialLaunch extends Error {
  readonly launched: Instance[]
  readonly total: number
  override readonly cause: unknown
  constructor(launched: Instance[], total: number, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause))
    this.launched = launched
    this.total = total
    this.cause = cause
  }
}

/** The body of POST /instances/ (and of its dry run, POST /instances/check/) for the form. */
export function createBody(form: LaunchForm, project: string, queue = false, name = instanceNames(form)[0]): Schemas['InstanceCreateInputRequest'] {
  return {
    project,
    name,
    flavor: form.flavor ?? '',
    image: form.image ?? '',
    ssh_keys: form.sshKeys,
    user_data: '',
    sla_tier: '', // the organization's default tier
    ...(form.subnet ? { subnet_id: form.subnet, security_group_ids: form.securityGroups } : {}),
    ...(form.ibPartition ? { ib_partition_id: form.ibPartition } : {}),
    queue,
  }
}

/** "GPU model" choices: each model offered, then CPU-only flavors. */
export function gpuModels(flavors: Flavor[]): string[] {
  const models = [...new Set(flavors.filter((f) => f.gpu_model && f.gpu_form !== 'none').map((f) => f.gpu_model))]
  models.sort()
  return flavors.some((f) => !f.gpu_model || f.gpu_form === 'none') ? [...models, 'CPU only'] : models
}

/** The estimated cost of running `hours` at the list price `perHour` (a decimal string, as the check answers it):
 * the product, or null when either is missing or not a number. An estimate only: billing is per second of use
 * with the price book's minimum, and the price may change. */
export function estimate(perHour: string | null | undefined, hours: number | string | null | undefined): number | null {
  const price = Number(perHour)
  const h = Number(hours)
  if (perHour == null || hours == null || hours === '' || !Number.isFinite(price) || !Number.isFinite(h) || h < 0) return null
  return Math.round(price * h * 10_000) / 10_000
}

/** The check's refusal: a role that may not launch (403) is told so calmly, with the server's words; any other
 * refusal (an ended session's among them) is the usual problem alert. */
export function CheckRefused({ error }: { error: unknown }) {
  if (error instanceof ApiError && error.status === 403 && !isSignedOut(error)) {
    return (
      <Alert color="gray" title="Checked only for those who can launch" data-testid="check-not-for-role">
        {error.detail} The placement check and its price are answered for members who can launch in this project.
      </Alert>
    )
  }
  return <ProblemAlert error={error} title="The check was refused" />
}

function CheckResult({ check, market }: { check: Check; market: Market }) {
  const price = check.price
  return (
    <Stack gap="sm" data-testid="placement-check">
      <Group>
        {check.placeable ? (
          <Badge color="teal.9" size="lg">Can be placed now</Badge>
        ) : check.queue.would_queue || check.code === 'capacity_unavailable' ? (
          <Badge color="yellow.4" autoContrast size="lg">No capacity right now</Badge>
        ) : (
          <Badge color="red.9" size="lg">Cannot be launched</Badge>
        )}
        {price?.per_hour != null && market === 'on_demand' && (
          <Text fw={600} data-testid="price">
            {money(price.per_hour, price.currency, 4)} per hour
            <Text span c="dimmed" size="sm">
              {' '}({price.sla_tier} tier, {price.pricing_model.replace('_', '-')})
            </Text>
          </Text>
        )}
        {price && price.per_hour == null && <Text c="dimmed">No list price for this flavor yet.</Text>}
      </Group>
      {check.detail && (
        <Text>
          <strong>Why:</strong> {check.detail}
        </Text>
      )}
      {check.earliest_start && (
        <Text>
          <strong>Fits from:</strong> {new Date(check.earliest_start).toLocaleString()} (when running allocations end)
        </Text>
      )}
      {check.queue.position != null && (
        <Text>
          <strong>Queue:</strong> it would be number {check.queue.position} in the on-demand queue.
        </Text>
      )}
      {check.quota.length > 0 && (
        <QuotaTable lines={check.quota} label="Quota this launch uses" adds="This launch" />
      )}
    </Stack>
  )
}

/** Hours × the flavor's list price per hour (what the check answered), labelled as an estimate. */
function CostEstimate({ price, times = 1, market, hours, onHours, refused = false }: {
  price: Check['price'] | undefined
  refused?: boolean
  times?: number
  market: Market
  hours: number | string
  onHours: (hours: number | string) => void
}) {
  const perHour = price?.per_hour == null ? price?.per_hour : String(Number(price.per_hour) * times)
  const total = estimate(perHour, hours)
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="estimate-heading">
      <Title order={3} size="h4" id="estimate-heading" mb="xs">
        Cost estimate
      </Title>
      <Group align="flex-end">
        <NumberInput
          label="Running for (hours)"
          min={0}
          max={24 * 366}
          step={1}
          w={180}
          value={hours}
          onChange={onHours}
          disabled={market !== 'on_demand'}
        />
        <Text data-testid="estimate" pb={6}>
          {market === 'spot'
            ? 'Spot prices follow the market: no estimate.'
            : market === 'lease'
              ? 'Billed as part of the lease: no estimate.'
            : refused
              ? 'No estimate: the price comes with the placement check, which is for members who can launch.'
            : price?.per_hour == null
              ? 'No list price for this flavor yet: no estimate.'
              : total == null
                ? 'Enter a number of hours.'
                : <>
                    <strong>About {money(String(total), price.currency, 4)}</strong> for {Number(hours)} hour{Number(hours) === 1 ? '' : 's'} at{' '}
                    {money(perHour, price.currency, 4)} per hour{times > 1 ? ` (${times} instances)` : ''} (estimate)
                  </>}
        </Text>
      </Group>
      <Text size="xs" c="dimmed" mt="xs">
        An estimate, not a quote: billing is per second of actual use (with the price book’s minimum), before taxes and
        credits.
      </Text>
    </Paper>
  )
}

export function LaunchPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const navigate = useNavigate()
  const qc = useQueryClient()
  // The step is in the URL as the stepper numbers it (`?step=2` is the second step; the first has none), each move a
  // history entry: the browser's Back goes to the previous step instead of leaving the wizard. The choices are kept in the tab's sessionStorage (per project), so a reload
  // comes back to the same step with them; a launch or Cancel clears them.
  const [params, setParams] = useSearchParams()
  const step = Math.min(3, Math.max(0, (Number(params.get('step') ?? 1) || 1) - 1))
  const setStep = (next: number | ((s: number) => number)) => {
    const n = typeof next === 'function' ? next(step) : next
    if (n === step) return
    const p = new URLSearchParams(params)
    if (n === 0) p.delete('step')
    else p.set('step', String(n + 1))
    setParams(p)
  }
  const [form, setForm] = useState<LaunchForm>(() => loadDraft(pid))
  const [formProject, setFormProject] = useState(pid)
  if (formProject !== pid) {   // another project chosen in the header: its own choices
    setFormProject(pid)
    setForm(loadDraft(pid))
  }
  const [finished, setFinished] = useState(false)
  useEffect(() => {
    if (!finished) saveDraft(pid, form)
  }, [pid, form, finished])
  useEffect(() => {
    if (step > 0 && !form.flavor) setParams((p) => { const q = new URLSearchParams(p); q.delete('step'); return q }, { replace: true })
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [])
  const set = <K extends keyof LaunchForm>(key: K, value: LaunchForm[K]) => setForm((f) => ({ ...f, [key]: value }))

  const flavors = useFlavors()
  const images = useImages()
  const keys = useQuery({
    queryKey: ['ssh-keys', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/ssh-keys/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const subnets = useQuery({
    queryKey: ['subnets', pid],
    queryFn: () => unwrap(api.GET('/api/v1/subnets/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const subnet = subnets.data?.results.find((s) => s.id === form.subnet)
  const vpcs = useQuery({
    queryKey: ['vpcs', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/vpcs/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  // "gpu (10.40.1.0/24) in VPC prod": two VPCs may each have a subnet of the same name and CIDR
  const subnetLabel = (s: { name: string, cidr: string, vpc: string }) => {
    const vpc = vpcs.data?.results.find((v) => v.id === s.vpc)
    return `${s.name} (${s.cidr})${vpc ? ` in VPC ${vpc.name}` : ''}`
  }
  const partitions = useQuery({
    queryKey: ['ib-partitions', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/ib-partitions/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const partition = partitions.data?.results.find((p) => p.id === form.ibPartition)
  const leases = useQuery({
    queryKey: ['leases', pid, 'active'],
    queryFn: () => unwrap(api.GET('/api/v1/leases/', { params: { query: { project: pid, status: 'active', page_size: 500 } } })),
  })
  const lease = leases.data?.results.find((l) => l.id === form.lease)
  const cluster = form.shape === 'cluster'
  const names = instanceNames(form)
  const [hours, setHours] = useState<number | string>(24)
  const groups = useQuery({
    queryKey: ['security-groups', subnet?.vpc],
    queryFn: () => unwrap(api.GET('/api/v1/security-groups/', { params: { query: { vpc: subnet!.vpc, page_size: 500 } } })),
    enabled: Boolean(subnet),
  })

  const models = gpuModels(flavors.data ?? [])
  const model = form.gpuModel ?? models[0] ?? null
  const choices = (flavors.data ?? []).filter((f) =>
    model === 'CPU only' ? !f.gpu_model || f.gpu_form === 'none' : f.gpu_model === model && f.gpu_form !== 'none',
  )
  const flavor = flavors.data?.find((f) => f.id === form.flavor)
  const image = images.data?.find((i) => i.id === form.image)
  const body = createBody(form, pid)
  const bodyKey = JSON.stringify({ body, shape: form.shape, count: form.count, market: form.market, lease: form.lease })

  // The review's check: the cluster's (the whole gang) or the first instance's. Inside a lease the lease's own
  // capacity decides, which the on-demand check does not answer: the create says it.
  const check = useQuery({
    queryKey: ['instance-check', bodyKey],
    queryFn: () => cluster
      ? unwrap(api.POST('/api/v1/clusters/check/', { body: clusterCreateBody(form, pid) }))
      : unwrap(api.POST('/api/v1/instances/check/', { body })),
    enabled: step === 3 && form.market !== 'lease' && Boolean(form.flavor && form.image && form.name.trim()),
    staleTime: 0,
    retry: false,
  })

  // As soon as a flavor is chosen: can it be placed now, and at what price (the check without name and image,
  // which are not chosen yet; the review step checks the whole request again).
  const flavorCheck = useQuery({
    queryKey: ['instance-check-flavor', pid, form.flavor],
    queryFn: () =>
      unwrap(api.POST('/api/v1/instances/check/', {
        body: { project: pid, flavor: form.flavor ?? '', name: '', ssh_keys: [], user_data: '', sla_tier: '', queue: false },
      })),
    enabled: step === 0 && Boolean(pid && form.flavor),
    staleTime: 5_000,
    retry: false,
  })

  // One Idempotency-Key per distinct request: a double click, or a retry after a lost answer (a reload among them),
  // creates one instance.
  // (several instances: one key each, so a retry after a refusal part-way replays those made and goes on)
  const idempotencyKey = useMemo(() => launchKey(pid, bodyKey), [pid, bodyKey])
  const launch = useMutation({
    mutationFn: async (queue: boolean): Promise<string> => {
      const key = `${idempotencyKey}${queue ? '-q' : ''}`
      if (cluster) {
        const made = await unwrap(api.POST('/api/v1/clusters/', {
          body: { ...clusterCreateBody(form, pid), queue }, params: { header: { 'Idempotency-Key': key } },
        }))
        return `/clusters/${made.id}`
      }
      const launched: Instance[] = []
      for (const [i, name] of names.entries()) {
        const headers = { 'Idempotency-Key': names.length > 1 ? `${key}-${i + 1}` : key }
        try {
          const answer = form.market === 'on_demand'
            ? await unwrap(api.POST('/api/v1/instances/', { body: createBody(form, pid, queue, name), params: { header: headers } }))
            : await unwrap(api.POST('/api/v1/instance-requests/', { body: requestBody(form, pid, name), headers }))
          launched.push(answer.instance)
        } catch (error) {
          throw launched.length ? new PartialLaunch(launched, names.length, error) : error
        }
      }
      return launched.length === 1 ? `/instances/${launched[0].id}` : '/instances'
    },
    onSuccess: (path) => {
      setFinished(true)
      saveDraft(pid, null)
      void qc.invalidateQueries({ queryKey: ['instances'] })
      void qc.invalidateQueries({ queryKey: ['clusters'] })
      navigate(path)
    },
    onError: (error) => {
      const problem = error instanceof PartialLaunch ? error.cause : error
      if (error instanceof PartialLaunch) void qc.invalidateQueries({ queryKey: ['instances'] })
      if (problem instanceof ApiError) {
        const steps = Object.keys(problem.errors).map((f) => FIELD_STEP[f]).filter((s) => s !== undefined)
        if (steps.length) setStep(Math.min(...steps))
      }
    },
  })
  const partial = launch.error instanceof PartialLaunch ? launch.error : null
  const err = partial ? partial.cause : launch.error

  const countValid = Number.isInteger(form.count) && form.count >= 1 && form.count <= (cluster ? MAX_NODES : MAX_COUNT)
  const nameProblem = names.map(hostnameProblem).find(Boolean) ?? null
  // several instances are created one by one, each checked alone: the check's quota lines say how many fit
  const countShort = check.data && !cluster && names.length > 1 ? quotaFits(check.data.quota, names.length) : null
  const stepValid = [Boolean(form.flavor), Boolean(form.name.trim() && form.image && !nameProblem), countValid && (form.market !== 'lease' || Boolean(form.lease)), true]
  // what the step still needs, said beside its greyed-out Next
  const stepNeeds = [
    'Choose a flavor',
    [!form.name.trim() && 'a name', nameProblem && 'a valid name', !form.image && 'an image'].filter(Boolean).join(' and '),
    !countValid ? `A count from 1 to ${cluster ? MAX_NODES : MAX_COUNT}` : 'Choose the lease to launch in',
    '',
  ]
  const networked = form.market === 'on_demand'   // the request API (spot, lease) takes no subnet or partition
  const next = () => setStep((s) => Math.min(3, s + 1))
  const back = () => setStep((s) => Math.max(0, s - 1))
  const cancel = () => {
    setFinished(true)
    saveDraft(pid, null)
    navigate('/instances')
  }

  if (flavors.isSuccess && (flavors.data ?? []).length === 0)
    return (
      <EmptyState title="No flavors are offered yet">
        The provider has not published instance types for your organization. Ask your provider's support.
      </EmptyState>
    )

  return (
    <Stack>
      <Title order={2}>Launch an instance</Title>
      {partial && (
        <Alert color="yellow" title={`${partial.launched.length} of ${partial.total} instances launched`} data-testid="partial-launch">
          Launched: {partial.launched.map((i, n) => (
            <span key={i.id}>{n > 0 && ', '}<Anchor component={Link} to={`/instances/${i.id}`}>{i.name}</Anchor></span>
          ))}. The next one was refused (below); launching again makes only the ones still missing.
        </Alert>
      )}
      <ProblemAlert error={err} title={cluster ? 'The cluster was not launched' : 'The instance was not launched'} shownFields={Object.keys(FIELD_STEP)} />
      <Stepper active={step} onStepClick={setStep} allowNextStepsSelect={false} size="sm">
        <Stepper.Step label="Flavor" description="GPU model and slice">
          <Stack mt="md">
            <SegmentedControl
              aria-label="GPU model"
              data={models}
              value={model ?? ''}
              onChange={(v) => setForm((f) => ({ ...f, gpuModel: v, flavor: null }))}
            />
            <Radio.Group
              label="Flavor"
              description="Whole GPUs, or a MIG slice of one"
              value={form.flavor}
              onChange={(v) => set('flavor', v)}
              error={fieldError(err, 'flavor')}
              required
            >
              <Stack gap="xs" mt="xs">
                {flavors.isPending && <Loader role="status" size="sm" aria-label="Loading flavors" />}
                {choices.map((f) => (
                  <Radio key={f.id} value={f.id} label={`${f.name} — ${gpuLabel(f)}`} description={sizeLabel(f)} />
                ))}
              </Stack>
            </Radio.Group>
            {form.flavor && (
              <Paper withBorder p="md" aria-live="polite" data-testid="flavor-check">
                {flavorCheck.isFetching && !flavorCheck.data && <Loader role="status" size="sm" aria-label="Checking" />}
                <CheckRefused error={flavorCheck.error} />
                {flavorCheck.data && <CheckResult check={flavorCheck.data} market={form.market} />}
              </Paper>
            )}
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="Image and access" description="OS, name, SSH keys">
          <Stack mt="md" maw={560}>
            <TextInput
              label="Name"
              description="Becomes the hostname: lower-case letters, digits and hyphens, at most 63 characters"
              required
              maxLength={63}
              value={form.name}
              onChange={(e) => set('name', e.currentTarget.value)}
              error={nameProblem ?? fieldError(err, 'name')}
            />
            <Select
              label="Image"
              required
              placeholder="Choose an image"
              data={(images.data ?? []).map((i) => ({ value: i.id, label: imageLabel(i) }))}
              value={form.image}
              onChange={(v) => set('image', v)}
              allowDeselect={false}
              error={fieldError(err, 'image')}
            />
            <Checkbox.Group
              label="SSH keys"
              description="Installed for the default user"
              value={form.sshKeys}
              onChange={(v) => set('sshKeys', v)}
              error={fieldError(err, 'ssh_keys')}
            >
              <Stack gap="xs" mt="xs">
                {(keys.data?.results ?? []).map((k) => (
                  <Checkbox key={k.id} value={k.id} label={`${k.name} (${k.fingerprint})`} />
                ))}
                {keys.isSuccess && keys.data.results.length === 0 && (
                  <Text size="sm">
                    No keys in this project: <Anchor component={Link} to="/ssh-keys">add one</Anchor> to sign in to the
                    instance with SSH.
                  </Text>
                )}
              </Stack>
            </Checkbox.Group>
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="How many, market, network" description="Count or cluster, spot, lease">
          <Stack mt="md" maw={640}>
            <Radio.Group
              label="How many"
              value={form.shape}
              onChange={(v) => setForm((f) => ({ ...f, shape: v as Shape, ...(v === 'cluster' ? { market: 'on_demand', lease: null } : {}) }))}
            >
              <Group mt="xs" align="flex-start">
                <Radio value="instances" label="Instances" description="Each placed on its own and managed on its own" />
                <Radio value="cluster" label="A cluster of N nodes" description="Placed together (all or nothing), deleted together" />
              </Group>
            </Radio.Group>
            <NumberInput
              label={cluster ? 'Nodes' : 'Count'}
              description={cluster
                ? `1 to ${MAX_NODES} nodes, named ${form.name.trim() || '<name>'}-1, -2, …`
                : form.count > 1
                  ? `Named ${names[0]} … ${names[names.length - 1]} (at most ${MAX_COUNT})`
                  : `1 to ${MAX_COUNT} instances`}
              required
              min={1}
              max={cluster ? MAX_NODES : MAX_COUNT}
              allowDecimal={false}
              w={220}
              value={form.count}
              onChange={(v) => set('count', typeof v === 'number' ? v : Number(v) || 0)}
              error={countValid ? fieldError(err, 'size') : `Enter a whole number from 1 to ${cluster ? MAX_NODES : MAX_COUNT}.`}
            />
            <Radio.Group
              label="Market"
              value={form.market}
              onChange={(v) => setForm((f) => ({ ...f, market: v as Market, ...(v === 'on_demand' ? {} : { subnet: null, securityGroups: [], ibPartition: null }) }))}
              description={cluster ? 'A cluster is on-demand capacity' : undefined}
            >
              <Group mt="xs" align="flex-start">
                <Radio value="on_demand" label="On-demand" description="Runs until you stop or delete it" />
                <Radio value="spot" label="Spot" disabled={cluster} description="Cheaper; may be interrupted when capacity is needed" />
                <Radio value="lease" label="Inside a lease" disabled={cluster} description="On capacity an active lease of the project holds" />
              </Group>
            </Radio.Group>
            {form.market === 'lease' && (
              <Select
                label="Lease"
                required
                placeholder={(leases.data?.results ?? []).length ? 'Choose an active lease' : 'No active lease in this project'}
                description={<>The lease’s GPUs, not on-demand capacity; <Anchor component={Link} to="/leases" size="xs" underline="always">leases</Anchor> become active at their start</>}
                data={(leases.data?.results ?? []).map((l) => ({ value: l.id, label: leaseLabel(l) }))}
                value={form.lease}
                onChange={(v) => set('lease', v)}
                allowDeselect={false}
                error={fieldError(err, 'lease')}
              />
            )}
            <Select
              label="Subnet"
              placeholder="No private network"
              clearable
              clearButtonProps={{ 'aria-label': 'No subnet', 'aria-hidden': false, tabIndex: 0 }}
              allowDeselect={false}
              disabled={!networked}
              description={!networked ? 'Spot and lease requests join no subnet (the request API takes none)' : 'The instance gets a port with a fixed IP'}
              data={(subnets.data?.results ?? []).map((s) => ({ value: s.id, label: subnetLabel(s) }))}
              value={form.subnet}
              onChange={(v) => setForm((f) => ({ ...f, subnet: v, securityGroups: [] }))}
              error={fieldError(err, 'subnet_id')}
            />
            <MultiSelect
              label="Security groups"
              placeholder={form.subnet ? 'Default group of the VPC' : 'Choose a subnet first'}
              disabled={!form.subnet || !networked}
              data={(groups.data?.results ?? []).map((g) => ({ value: g.id, label: g.name }))}
              value={form.securityGroups}
              onChange={(v) => set('securityGroups', v)}
              error={fieldError(err, 'security_group_ids')}
            />
            <Select
              label="InfiniBand partition (optional)"
              placeholder={(partitions.data?.results ?? []).length ? 'No InfiniBand partition' : 'No partitions in this project'}
              clearable
              clearButtonProps={{ 'aria-label': 'No InfiniBand partition', 'aria-hidden': false, tabIndex: 0 }}
              allowDeselect={false}
              disabled={!networked}
              description={!networked
                ? 'Spot and lease requests join no partition (the request API takes none)'
                : 'Its HCA ports (or a virtual function’s GUID) join the partition as full members once placed'}
              data={(partitions.data?.results ?? []).map((p) => ({ value: p.id, label: `${p.name} (${p.fabric}, ${p.pkey_hex})` }))}
              value={form.ibPartition}
              onChange={(v) => set('ibPartition', v)}
              error={fieldError(err, 'ib_partition_id')}
            />
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="Review" description="Placement and price">
          <Stack mt="md">
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>Flavor</dt>
                <dd>{flavor ? `${flavor.name} — ${gpuLabel(flavor)}, ${sizeLabel(flavor)}` : '—'}</dd>
                <dt>Image</dt>
                <dd>{imageLabel(image)}</dd>
                <dt>Name</dt>
                <dd>{form.name || '—'}</dd>
                <dt>How many</dt>
                <dd data-testid="how-many">
                  {cluster
                    ? `a cluster of ${form.count} node${form.count === 1 ? '' : 's'}`
                    : names.length > 1 ? `${names.length} instances: ${names[0]} … ${names[names.length - 1]}` : 'one instance'}
                </dd>
                <dt>SSH keys</dt>
                <dd>{form.sshKeys.length ? (keys.data?.results ?? []).filter((k) => form.sshKeys.includes(k.id)).map((k) => k.name).join(', ') : 'none'}</dd>
                <dt>Network</dt>
                <dd>{subnet ? subnetLabel(subnet) : 'none'}</dd>
                <dt>InfiniBand</dt>
                <dd>{partition ? `${partition.name} (${partition.fabric}, ${partition.pkey_hex})` : 'none'}</dd>
                <dt>Market</dt>
                <dd>{form.market === 'spot' ? 'spot' : form.market === 'lease' ? `inside the lease ${lease ? leaseLabel(lease) : '—'}` : 'on-demand'}</dd>
              </dl>
            </Paper>
            <Paper withBorder p="md" component="section" aria-labelledby="check-heading" aria-busy={check.isFetching}>
              <Group justify="space-between" mb="xs">
                <Title order={3} size="h4" id="check-heading">
                  Can it be placed now?
                </Title>
                {form.market !== 'lease' && (
                  <Button variant="subtle" size="xs" onClick={() => void check.refetch()} loading={check.isFetching}>
                    Check again
                  </Button>
                )}
              </Group>
              {check.isPending && check.fetchStatus === 'fetching' && <Loader role="status" size="sm" aria-label="Checking" />}
              <CheckRefused error={check.error} />
              {form.market === 'lease' && (
                <Text data-testid="lease-note">
                  Inside a lease the lease’s own GPUs decide, not on-demand capacity: the launch is refused, saying why,
                  when the lease has no room left for {names.length > 1 ? 'them' : 'it'}.
                </Text>
              )}
              {check.data && <CheckResult check={check.data} market={form.market} />}
              {countShort && (
                <Alert color="red" mt="xs" data-testid="count-over-quota"
                  title={<Text span fw={700} size="sm" c="var(--mantine-color-text)">The quota allows {countShort.fits} of these {names.length} instances</Text>}>
                  {quotaLabel(countShort.line.resource)} ({quotaScope(countShort.line.scope)}): {quotaAmount(countShort.line.resource, countShort.line.used)} used
                  of {quotaAmount(countShort.line.resource, countShort.line.limit)}, and each instance adds {quotaAmount(countShort.line.resource, countShort.line.requested)}.
                  Lower the count to {countShort.fits || 'fewer'}, or ask an owner to have the quota raised.
                </Alert>
              )}
              {check.data && names.length > 1 && (
                <Text size="sm" c="dimmed" mt="xs" data-testid="count-note">
                  The check is for {names[0]}; each of the {names.length} instances is placed (and counted against the
                  quota) on its own, so a later one may be refused when the first ones take the last room.
                </Text>
              )}
              {check.data && cluster && (
                <Text size="sm" c="dimmed" mt="xs">The check and the price are for the whole cluster of {form.count} nodes.</Text>
              )}
            </Paper>
            <CostEstimate
              price={(check.data ?? flavorCheck.data)?.price}
              times={cluster ? 1 : names.length}
              market={form.market}
              hours={hours}
              onHours={setHours}
              refused={[check.error, flavorCheck.error].some((e) => e instanceof ApiError && e.status === 403)}
            />
            {!canWrite && <Alert color="yellow">Your role in this project is read-only: you cannot launch.</Alert>}
          </Stack>
        </Stepper.Step>
      </Stepper>
      <Group justify="space-between">
        <Group>
          <Button variant="default" onClick={back} disabled={step === 0}>
            Back
          </Button>
          <Button variant="default" onClick={cancel}>
            Cancel
          </Button>
        </Group>
        {step < 3 ? (
          <Group gap="sm">
            {!stepValid[step] && (
              <Text size="sm" c="dimmed" data-testid="step-needs">
                {step === 1 ? `Needs ${stepNeeds[1]}` : stepNeeds[step]}
              </Text>
            )}
            <Button onClick={next} disabled={!stepValid[step]}>
              Next
            </Button>
          </Group>
        ) : (
          <Group>
            {check.data && !check.data.placeable && check.data.code === 'capacity_unavailable' && form.market === 'on_demand' && (
              <WriteButton variant="light" onClick={() => launch.mutate(true)} loading={launch.isPending && launch.variables}>
                Queue until it fits
              </WriteButton>
            )}
            <WriteButton
              onClick={() => launch.mutate(false)}
              loading={launch.isPending && !launch.variables}
              disabled={!stepValid[0] || !stepValid[1] || !stepValid[2] || (check.data ? !check.data.placeable && form.market === 'on_demand' : false)
                || (check.error instanceof ApiError && check.error.status === 400) || Boolean(countShort)}
            >
              {cluster ? `Launch a cluster of ${form.count}` : names.length > 1 ? `Launch ${names.length} instances` : 'Launch'}
            </WriteButton>
          </Group>
        )}
      </Group>
    </Stack>
  )
}
