import { fireEvent, screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { BillingPage, InvoiceDetailPage, duration, money, notForRole, pct, slaTotals, unitAfter } from './Billing'
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
    const lines = screen.getByRole('table', { name: /lines/i })
    expect(within(lines).getByText('2 hours')).toBeInTheDocument()          // not "2 hour"
    expect(within(lines).getByText('$19.92 / hour')).toBeInTheDocument()
    const ask = seen.find((r) => new URL(r.url).pathname === '/api/v1/usage/')!
    expect(new URL(ask.url).searchParams.get('invoice_line')).toBe(LINE.id)
  })

  it('says a line\'s unit in words: hours in the plural, a count (each) as the number alone', () => {
    expect(unitAfter(735, 'hour')).toBe('hours')
    expect(unitAfter(1, 'hour')).toBe('hour')
    expect(unitAfter(1, 'each')).toBe('')
    expect(unitAfter(3, 'GiB-month')).toBe('GiB-month')
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

const NOTE = { id: '0190a3b4-0000-7000-8000-0000000000f1', invoice: INVOICE.id, organization: ORG.id, number: 2, display_number: 'CN-2026-000002', currency: 'USD', amount: '5.00', tax: '0.00', total: '5.00', reason: 'Outage on 3 November', issued_at: '2026-12-02T10:00:00Z' }
const REPORT = { id: 's1', organization: ORG.id, project: PROJECT.id, resource_type: 'instance', resource_id: '0190a3b4-0000-7000-8000-000000000111', sla_tier: 'premium', period: '2026-11', held_minutes: '43200', downtime_minutes: '540', uptime_pct: '98.75000000', target_uptime_pct: '99.9000', credit_pct: '25.00', billed_amount: '2844.00', credit_amount: '711.00', currency: 'USD', source_invoice: INVOICE.id, applied_invoice: null }

describe('billing: credit notes and the SLA report', () => {
  it('lists the credit notes with their downloads and the SLA report with pending and granted credits', async () => {
    const seen = stubApi({
      'GET /api/v1/invoices/preview/': () => json(PREVIEW),
      'GET /api/v1/invoices/': () => json(page([INVOICE])),
      'GET /api/v1/credit-notes/': () => json(page([NOTE])),
      'GET /api/v1/sla-reports/': (r) => json(page(new URL(r.url).searchParams.get('period') === '2026-10' ? [] : [
        REPORT, { ...REPORT, id: 's2', period: '2026-10', credit_amount: '10.00', applied_invoice: INVOICE.id, uptime_pct: '99.50000000' }])),
    })
    renderPage(<BillingPage />, { value: scope({ organization: ORG }) })
    const note = await screen.findByTestId('credit-note')
    expect(note).toHaveTextContent('CN-2026-000002')
    expect(note).toHaveTextContent('Outage on 3 November')
    expect(within(note).getByRole('link', { name: 'PDF of CN-2026-000002' })).toHaveAttribute('href', `/api/v1/credit-notes/${NOTE.id}/pdf/`)
    expect(within(note).getByRole('link', { name: 'CSV of CN-2026-000002' })).toHaveAttribute('href', `/api/v1/credit-notes/${NOTE.id}/csv/`)
    expect(await within(note).findByRole('link', { name: 'INV-2026-000007' })).toHaveAttribute('href', `/billing/invoices/${INVOICE.id}`)
    const report = screen.getByTestId('sla-report')
    const rows = await within(report).findAllByTestId('sla-row')
    expect(rows[0]).toHaveTextContent('98.75 %')
    expect(rows[0]).toHaveTextContent('target 99.9 %')
    expect(rows[0]).toHaveTextContent('540 of 43,200 min')
    expect(within(rows[0]).getByTestId('sla-status')).toHaveTextContent('Pending: on the next invoice')
    expect(within(rows[1]).getByTestId('sla-status')).toHaveTextContent('Granted on INV-2026-000007')
    expect(within(report).getByTestId('sla-pending')).toHaveTextContent('$711.00')
    expect(within(report).getByTestId('sla-granted')).toHaveTextContent('$10.00')
    for (const path of ['/api/v1/credit-notes/', '/api/v1/sla-reports/'])
      expect(new URL(seen.find((r) => new URL(r.url).pathname === path)!.url).searchParams.get('organization')).toBe(ORG.id)
    fireEvent.change(within(report).getByLabelText('Month'), { target: { value: '2026-10' } })
    expect(await within(report).findByTestId('sla-empty')).toHaveTextContent('No provider-caused downtime was measured for 2026-10.')
  })

  it('says what a credit note is when there is none', async () => {
    stubApi({
      'GET /api/v1/invoices/preview/': () => json(PREVIEW),
      'GET /api/v1/invoices/': () => json(page([])),
      'GET /api/v1/credit-notes/': () => json(page([])),
      'GET /api/v1/sla-reports/': () => json(page([])),
    })
    renderPage(<BillingPage />, { value: scope({ organization: ORG }) })
    expect(await screen.findByTestId('credit-notes-empty')).toHaveTextContent('No credit notes.')
    expect(await screen.findByTestId('sla-empty')).toHaveTextContent('every resource met its SLA')
  })

  it('sums pending and granted credits', () => {
    const t = slaTotals([REPORT, { ...REPORT, credit_amount: '0.00', uptime_pct: '99.95' }, { ...REPORT, applied_invoice: 'x', credit_amount: '1.50' }] as never)
    expect(t).toEqual({ currency: 'USD', pending: 711, granted: 1.5, downtimeMinutes: 1620, belowTarget: 2 })
    expect(pct('99.99800000')).toBe('99.998 %')
  })
})
