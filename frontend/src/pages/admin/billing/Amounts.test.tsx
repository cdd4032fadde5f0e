import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, renderPage, stubApi } from '../../../test/render'
import { AdminInvoicePage } from './Invoices'
import { amountProblem, minorDigits } from './logic'

const ME = { id: 'u', email: 'x@provider.example', full_name: 'X', staff_role: 'billing_admin', is_service_account: false,
  date_joined: '2026-01-01T00:00:00Z', memberships: [] }
const FINAL = { id: 'i1', organization: 'o1', period: '2026-10', period_start: '2026-10-01T00:00:00Z', period_end: '2026-11-01T00:00:00Z',
  timezone: 'UTC', currency: 'USD', status: 'finalized', number: 7, display_number: 'INV-00000007', tax_rate: '0', reverse_charge: false,
  subtotal: '50.00', credits: '0.00', tax: '0.00', total: '50.00', credited: '0.00', amount_paid: '0.00', balance_due: '50.00',
  unpriced_seconds: 0, finalized_at: null, paid_at: null, payment_reference: '', voided_at: null,
  allowed_actions: ['pay', 'void', 'credit_note'], lines: [] }
const EMPTY = { results: [], next: null, previous: null }
const LONG = { timeout: 5000 }

describe('amounts typed by billing staff', () => {
  it('are refused, not rounded, when they have more decimals than the currency', () => {
    expect(minorDigits('USD')).toBe(2)
    expect(minorDigits('JPY')).toBe(0)
    expect(amountProblem('10.00', 'USD')).toBeUndefined()
    expect(amountProblem('10.5', 'USD')).toBeUndefined()
    expect(amountProblem('10.0100', 'USD')).toBeUndefined()   // trailing zeros change nothing
    expect(amountProblem('10.001', 'USD')).toMatch(/at most 2 decimals \(10\.001 has 3\)/)
    expect(amountProblem('1000.5', 'JPY')).toMatch(/no decimals/)
    expect(amountProblem('0', 'USD')).toBe('An amount is more than 0.')
    expect(amountProblem('1,5', 'USD')).toMatch(/a number such as/)
    expect(amountProblem(' ', 'USD')).toBe('Enter an amount.')
  })

  it('a credit note of 10.001 is refused on the field and nothing is sent; 10.01 is sent as typed', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME),
      'GET /api/v1/invoices/i1/': () => json(FINAL),
      'GET /api/v1/credit-notes/': () => json(EMPTY),
      'POST /api/v1/credit-notes/': () => json({ id: 'c1', invoice: 'i1', number: 1, display_number: 'CN-1', amount: '10.01',
        tax: '0.00', total: '10.01', reason: 'goodwill', issued_at: '2026-11-02T00:00:00Z' }, 201),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    fireEvent.click(await screen.findByRole('button', { name: 'Issue credit note' }, LONG))
    const note = await screen.findByRole('dialog', { name: 'Credit note against INV-00000007' })
    const amount = within(note).getByLabelText(/^Amount before tax/)
    fireEvent.change(amount, { target: { value: '10.001' } })
    expect(amount).toHaveValue('10.001')     // kept as typed
    fireEvent.change(within(note).getByLabelText(/^Reason/), { target: { value: 'goodwill' } })
    fireEvent.click(within(note).getByRole('button', { name: 'Issue' }))
    expect(await within(note).findByText(/USD amounts have at most 2 decimals \(10\.001 has 3\)/)).toBeInTheDocument()
    expect(amount).toHaveAttribute('aria-invalid', 'true')
    expect(seen.filter((r) => r.method === 'POST')).toHaveLength(0)
    fireEvent.change(amount, { target: { value: '10.01' } })
    fireEvent.click(within(note).getByRole('button', { name: 'Issue' }))
    await waitFor(() => expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1), LONG)
    expect(await seen.find((r) => r.method === 'POST')!.json()).toEqual({ invoice: 'i1', amount: '10.01', reason: 'goodwill' })
  }, 20_000)

  it('a payment of 50.005 is refused on the field, not recorded as 50.00', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME),
      'GET /api/v1/invoices/i1/': () => json(FINAL),
      'GET /api/v1/credit-notes/': () => json(EMPTY),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    fireEvent.click(await screen.findByRole('button', { name: 'Record payment' }, LONG))
    const dialog = await screen.findByRole('dialog', { name: 'Record a payment of INV-00000007' })
    const amount = within(dialog).getByLabelText(/^Amount received/)
    expect(amount).toHaveValue('50.00')      // the balance due
    fireEvent.change(amount, { target: { value: '50.005' } })
    fireEvent.change(within(dialog).getByLabelText(/^Reference/), { target: { value: 'wire 42' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Record payment' }))
    expect(await within(dialog).findByText(/at most 2 decimals \(50\.005 has 3\)/)).toBeInTheDocument()
    expect(seen.filter((r) => r.method === 'POST')).toHaveLength(0)
  }, 20_000)
})
