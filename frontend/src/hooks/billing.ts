import { useQuery } from '@tanstack/react-query'
import { ApiError, api, unwrap } from '../api/client'

/** "$1,234.50": a decimal string of the API in the invoice's currency ("—" when there is none). A rate (a price per
 * hour, which may be a fraction of a cent) asks for `fractionDigits` up to 4: "$0.0042". */
export function money(amount: string | null | undefined, currency: string, fractionDigits = 2): string {
  if (amount == null || amount === '') return '—'
  const value = Number(amount)
  if (Number.isNaN(value)) return amount
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency, maximumFractionDigits: Math.max(2, fractionDigits) }).format(value)
  } catch {
    return `${amount} ${currency}`
  }
}

/** The caller may not read this organization's bills: the server answers the preview's `organization` as missing
 * (400 naming the field) or refuses it (403/404). */
export function notForRole(error: unknown): boolean {
  if (!(error instanceof ApiError)) return false
  return error.status === 403 || error.status === 404 || (error.status === 400 && 'organization' in error.errors)
}

/** The organization's month to date (`GET /invoices/preview/?organization=`): the server's estimate of this month's
 * invoice from the usage recorded so far, refreshed every minute (not after a refusal). One cache entry per
 * organization, shared by the Billing screen and the dashboard. */
export function useInvoicePreview(organization: string) {
  return useQuery({
    queryKey: ['invoice-preview', organization],
    queryFn: () => unwrap(api.GET('/api/v1/invoices/preview/', { params: { query: { organization } } })),
    enabled: Boolean(organization),
    refetchInterval: (q) => (q.state.error ? false : 60_000),
  })
}
