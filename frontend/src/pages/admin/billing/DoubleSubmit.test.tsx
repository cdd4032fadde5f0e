import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it, vi } from 'vitest'
import { ConfirmButton } from '../../../components/ConfirmButton'
import { json, problem, renderPage, stubApi } from '../../../test/render'
import { AdminInvoiceRunsPage } from './InvoiceRuns'
import { AdminInvoicePage } from './Invoices'

const ME = { id: 'u', email: 'x@provider.example', full_name: 'X', staff_role: 'billing_admin', is_service_account: false,
  date_joined: '2026-01-01T00:00:00Z', memberships: [] }
const INVOICE = { id: 'i1', organization: 'o1', period: '2026-10', period_start: '2026-10-01T00:00:00Z', period_end: '2026-11-01T00:00:00Z',
  timezone: 'UTC', currency: 'USD', status: 'draft', number: null, display_number: '', tax_rate: '0', reverse_charge: false,
  subtotal: '10.00', credits: '0.00', tax: '0.00', total: '10.00', credited: '0.00', amount_paid: '0.00', balance_due: '10.00',
  unpriced_seconds: 0, finalized_at: null, paid_at: null, payment_reference: '', voided_at: null, allowed_actions: ['finalize'], lines: [] }
const FINAL = { ...INVOICE, status: 'finalized', number: 7, display_number: 'INV-00000007', allowed_actions: ['pay', 'void', 'credit_note'] }
const EMPTY = { results: [], next: null, previous: null }
const posts = (seen: Request[]) => seen.filter((r) => r.method === 'POST')
const settle = () => new Promise((r) => setTimeout(r, 50))

describe('a confirm dialog confirms once per opening', () => {
  it('a double click on its confirm button calls onConfirm once; opening it again confirms again', async () => {
    const onConfirm = vi.fn()
    renderPage(<ConfirmButton label="Delete" title="Delete it?" message="m" onConfirm={onConfirm} />)
    fireEvent.click(screen.getByRole('button', { name: 'Delete' }))
    const confirm = within(await screen.findByRole('dialog')).getByRole('button', { name: 'Delete' })
    fireEvent.click(confirm)
    fireEvent.click(confirm)
    expect(onConfirm).toHaveBeenCalledTimes(1)
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument())
    fireEvent.click(screen.getByRole('button', { name: 'Delete' }))
    fireEvent.click(within(await screen.findByRole('dialog')).getByRole('button', { name: 'Delete' }))
    expect(onConfirm).toHaveBeenCalledTimes(2)
  })
})

describe('admin billing: a double click sends one request', () => {
  const invoicePage = () => renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })

  it('Finalize: one POST, and no "not finalized" alert over the finalized invoice', async () => {
    let calls = 0
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME),
      'GET /api/v1/invoices/i1/': () => json(INVOICE),
      'GET /api/v1/credit-notes/': () => json(EMPTY),
      'POST /api/v1/invoices/i1/finalize/': () => (++calls === 1 ? json(FINAL)
        : problem(409, 'invalid_state', 'already finalized')),
    })
    invoicePage()
    fireEvent.click(await screen.findByRole('button', { name: 'Finalize' }))
    const confirm = within(await screen.findByRole('dialog')).getByRole('button', { name: 'Finalize' })
    fireEvent.click(confirm)
    fireEvent.click(confirm)
    expect(await screen.findByRole('heading', { name: 'Invoice INV-00000007' })).toBeInTheDocument()
    await settle()
    expect(posts(seen)).toHaveLength(1)
    expect(screen.queryByText(/not finalized/)).not.toBeInTheDocument()
  })

  it('Void and Issue credit note: one POST each', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME),
      'GET /api/v1/invoices/i1/': () => json(FINAL),
      'GET /api/v1/credit-notes/': () => json(EMPTY),
      'POST /api/v1/credit-notes/': () => json({ id: 'c1', invoice: 'i1', number: 1, display_number: 'CN-1', amount: '1.00',
        tax: '0.00', total: '1.00', reason: 'goodwill', issued_at: '2026-11-02T00:00:00Z' }, 201),
      'POST /api/v1/invoices/i1/void/': () => json({ ...FINAL, status: 'void', allowed_actions: [] }),
    })
    invoicePage()
    fireEvent.click(await screen.findByRole('button', { name: 'Issue credit note' }))
    const note = await screen.findByRole('dialog', { name: 'Credit note against INV-00000007' })
    fireEvent.change(within(note).getByLabelText(/^Amount before tax/), { target: { value: '1' } })
    fireEvent.change(within(note).getByLabelText(/^Reason/), { target: { value: 'goodwill' } })
    const issue = within(note).getByRole('button', { name: 'Issue' })
    fireEvent.click(issue)
    fireEvent.click(issue)
    await waitFor(() => expect(posts(seen)).toHaveLength(1))
    expect(posts(seen)[0].headers.get('Idempotency-Key')).toBeTruthy()
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument())
    fireEvent.click(screen.getByRole('button', { name: 'Void' }))
    const voidDialog = await screen.findByRole('dialog', { name: 'Void INV-00000007?' })
    fireEvent.change(within(voidDialog).getByLabelText(/^Reason/), { target: { value: 'duplicate' } })
    const voidIt = within(voidDialog).getByRole('button', { name: 'Void invoice' })
    fireEvent.click(voidIt)
    fireEvent.click(voidIt)
    await waitFor(() => expect(posts(seen).filter((r) => r.url.endsWith('/void/'))).toHaveLength(1))
    await settle()
    expect(posts(seen)).toHaveLength(2)
  }, 20_000)

  it('Start run: one POST (with an Idempotency-Key), and no "in progress" refusal left on screen', async () => {
    let calls = 0
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME),
      'GET /api/v1/invoice-runs/': () => json(EMPTY),
      'POST /api/v1/invoice-runs/': () => (++calls === 1
        ? json({ id: 'r1', period: '2026-11', finalize: true, status: 'pending', created_at: '2026-12-02T00:00:00Z' }, 202)
        : problem(409, 'invoice_run_in_progress', 'An invoice run for 2026-11 is in progress (r1); wait for it to finish.')),
    })
    renderPage(<AdminInvoiceRunsPage />)
    const start = await screen.findByRole('button', { name: 'Start run' })
    fireEvent.click(start)
    fireEvent.click(start)
    await waitFor(() => expect(posts(seen)).toHaveLength(1))
    await settle()
    expect(posts(seen)).toHaveLength(1)
    expect(posts(seen)[0].headers.get('Idempotency-Key')).toBeTruthy()
    expect(screen.queryByText(/in progress/)).not.toBeInTheDocument()
  })
})
