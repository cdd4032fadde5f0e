import { fireEvent, screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { BillingPage, InvoiceDetailPage, duration, money, notForRole } from './Billing'
import { ApiError } from '../api/client'

const ORG = { id: PROJECT.organization, name: 'Orbit', role: 'billing' } as Organization
const LINE = { id: '0190a3b4-0000-7000-8000-0000000000d1', kind: 'usage', project: PROJECT.id, resource_type: 'instance', resource_id: 'i-1', sku: 'flavor:name=h100-8x', pricing_model: 'on_demand', sla_tier: 'standard', gpu_model: 'H100', description: 'h100-8x notebook', billed_seconds: '7200', quantity: '2', unit: 'hour', unit_price: '19.92', amount: '39.84', tax_amount: '0' }
const TOTALS = { currency: 'USD', tax_rate: '0', subtotal: '39.84', credits: '0.00', tax: '0.00', total: '39.84' }
const PREVIEW = { organization: ORG.id, period: '2026-12', period_start: '2026-12-01T00:00:00Z', period_end: '2027-01-01T00:00:00Z', timezone: 'UTC', status: 'draft', unpriced_seconds: '0', usage_until: '2026-12-03T10:00:00Z', lines: [LINE], ...TOTALS }
const INVOICE = { ...PREVIEW, id: '0190a3b4-0000-7000-8000-0000000000e1', status: 'finalized', period: '2026-11', number: 7, display_number: 'INV-2026-000007', credited: '0.00', balance_due: '39.84', finalized_at: '2026-12-01T02:00:00Z', paid_at: null, payment_reference: '', voided_at: null }
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })

describe('billing', () => {
  it('shows the month to date and the invoices of the organization', async () => {
    const seen = stubApi({
      'GET /api/v1/invoices/preview/': () => json(PREVIEW),
      'GET /api/v1/invoices/': () => json(page([INVOICE])),
    })
    renderPage(<BillingPage />, { value: scope({ organization: ORG }) })
    expect(await screen.findByTestId('total')).toHaveTextContent('$39.84')
    expect(screen.getByRole('table', { name: 'Month-to-date charges' })).toHaveTextContent('h100-8x notebook')
    expect(await screen.findByRole('link', { name: 'INV-2026-000007' })).toHaveAttribute('href', `/billing/invoices/${INVOICE.id}`)
    expect(new URL(seen[0].url).searchParams.get('organization')).toBe(ORG.id)
  })

  it('says billing is not available when the server does not let the role read the bills', async () => {
    const seen = stubApi({
      'GET /api/v1/invoices/preview/': () => problem(400, 'invalid', 'Invalid input.', { organization: ['Not found.'] }),
    })
    renderPage(<BillingPage />, { value: scope({ organization: { ...ORG, role: 'member' } }) })
    expect(await screen.findByTestId('billing-not-available')).toHaveTextContent('not available for your role')
    expect(screen.getByTestId('billing-not-available')).toHaveTextContent('your role in Orbit is member')
    expect(seen.map((r) => new URL(r.url).pathname)).toEqual(['/api/v1/invoices/preview/'])   // no invoice list asked
  })

  it('shows an invoice with its downloads and the usage records behind a line', async () => {
    const seen = stubApi({
      [`GET /api/v1/invoices/${INVOICE.id}/`]: () => json(INVOICE),
      'GET /api/v1/usage/': () => json(page([{ id: 'u1', organization: ORG.id, project: PROJECT.id, resource_type: 'instance', resource_id: 'i-1', sku: LINE.sku, pricing_model: 'on_demand', sla_tier: 'standard', start: '2026-11-02T10:00:00Z', end: '2026-11-02T12:00:00Z', seconds: 7200, run_id: 'r', source: 'compute.instance' }])),
    })
    renderPage(<InvoiceDetailPage />, { path: `/billing/invoices/${INVOICE.id}`, route: '/billing/invoices/:id' })
    expect(await screen.findByRole('heading', { name: 'Invoice INV-2026-000007' })).toBeInTheDocument()
    expect(screen.getByRole('link', { name: 'Download PDF' })).toHaveAttribute('href', `/api/v1/invoices/${INVOICE.id}/pdf/`)
    expect(screen.getByRole('link', { name: 'Download CSV' })).toHaveAttribute('href', `/api/v1/invoices/${INVOICE.id}/csv/`)
    fireEvent.click(screen.getByRole('button', { name: 'Usage behind h100-8x notebook' }))
    const records = await screen.findByRole('table', { name: 'Usage records' })
    expect(within(records).getByText('2 h')).toBeInTheDocument()
    const ask = seen.find((r) => new URL(r.url).pathname === '/api/v1/usage/')!
    expect(new URL(ask.url).searchParams.get('invoice_line')).toBe(LINE.id)
  })

  it('formats money, durations and the role refusal', () => {
    expect(money('1234.5', 'USD')).toBe('$1,234.50')
    expect(money('3', 'EUR')).toBe('€3.00')
    expect(money(null, 'USD')).toBe('—')
    expect(duration(7200)).toBe('2 h')
    expect(duration('90')).toBe('1.5 min')
    expect(duration(12)).toBe('12 s')
    expect(notForRole(new ApiError(400, { errors: { organization: ['Not found.'] } }))).toBe(true)
    expect(notForRole(new ApiError(403, {}))).toBe(true)
    expect(notForRole(new ApiError(400, { errors: { period: ['bad'] } }))).toBe(false)
    expect(notForRole(new ApiError(500, {}))).toBe(false)
  })
})
