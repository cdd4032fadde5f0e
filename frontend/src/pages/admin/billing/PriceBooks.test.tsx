import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, problem, renderPage, stubApi } from '../../../test/render'
import { AdminInvoicePage } from './Invoices'
import { AdminPriceBooksPage } from './PriceBooks'
import { nextMonthStart } from './logic'

const ME = (staff_role: string) => ({ id: 'u', email: 'x@provider.example', full_name: 'X', staff_role, is_service_account: false,
  date_joined: '2026-01-01T00:00:00Z', memberships: [] })
const BOOK = { id: 'b1', name: 'list prices', currency: 'USD', effective_from: '2026-01-01T00:00:00Z', notes: '', prices: [
  { id: 'p1', book: 'b1', sku: 'flavor:name=h100-8x', sla_tier: 'standard', pricing_model: 'on_demand', currency: 'USD', unit: 'hour',
    unit_price: '19.920000', billing_increment_seconds: 1, minimum_seconds: 60, effective_from: '2026-01-01T00:00:00Z' }] }

describe('admin price books', () => {
  it('publishes a version starting next month with the changed price, and shows the server’s refusal on the field', async () => {
    let calls = 0
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/price-books/': () => json({ results: [BOOK], next: null, previous: null }),
      'POST /api/v1/price-books/': () => (++calls === 1
        ? problem(409, 'price_book_exists', 'A book of this currency already starts then.',
          { effective_from: ['A USD price book already starts at 2027-01-01T00:00:00Z.'] })
        : json({ ...BOOK, id: 'b2' }, 201)),
    })
    renderPage(<AdminPriceBooksPage />)
    await screen.findByTestId('price-book')
    fireEvent.click(screen.getByRole('button', { name: 'New version' }))
    const dialog = await screen.findByRole('dialog', { name: 'New price book version' })
    expect(within(dialog).getByLabelText(/^Starts \(UTC\)/)).toHaveValue(nextMonthStart().slice(0, 16))
    const row = within(dialog).getAllByTestId('price-row')[0]
    expect(row).toHaveTextContent('$19.92 / hour')
    const publish = within(dialog).getByRole('button', { name: 'Publish version' })
    expect(publish).toBeDisabled()   // nothing changed yet
    fireEvent.change(within(row).getByRole('textbox'), { target: { value: '17.50' } })
    fireEvent.click(publish)
    expect(await within(dialog).findByText('A USD price book already starts at 2027-01-01T00:00:00Z.')).toBeInTheDocument()
    const post = seen.find((r) => r.method === 'POST')!
    expect(await post.json()).toMatchObject({ currency: 'USD', effective_from: nextMonthStart(),
      prices: [{ sku: 'flavor:name=h100-8x', sla_tier: 'standard', pricing_model: 'on_demand', unit_price: '17.50' }] })
    fireEvent.click(publish)
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument(), { timeout: 5_000 })
  }, 20_000)   // a modal and a table of inputs: slow on a loaded machine

  it('asks to confirm a price of 0 before publishing it (Enter in a field does not skip the question)', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/price-books/': () => json({ results: [BOOK], next: null, previous: null }),
      'POST /api/v1/price-books/': () => json({ ...BOOK, id: 'b2' }, 201),
    })
    renderPage(<AdminPriceBooksPage />)
    await screen.findByTestId('price-book', {}, { timeout: 5000 })
    fireEvent.click(screen.getByRole('button', { name: 'New version' }))
    const dialog = await screen.findByRole('dialog', { name: 'New price book version' })
    const input = within(within(dialog).getAllByTestId('price-row')[0]).getByRole('textbox')
    const publish = within(dialog).getByRole('button', { name: 'Publish version' })
    fireEvent.change(input, { target: { value: '0' } })
    const warning = await within(dialog).findByTestId('free-prices')
    expect(warning).toHaveTextContent('One price is 0')
    expect(warning).toHaveTextContent('flavor:name=h100-8x (standard, on-demand)')
    expect(publish).toBeDisabled()
    fireEvent.submit(publish.closest('form')!)              // Enter in a field does not get past it either
    const confirm = within(warning).getByRole('checkbox', { name: 'It is free on purpose' })
    fireEvent.click(confirm)
    expect(publish).toBeEnabled()
    fireEvent.change(input, { target: { value: '0.00' } })  // still the same free price: still confirmed
    expect(publish).toBeEnabled()
    fireEvent.change(input, { target: { value: '1.50' } })
    expect(within(dialog).queryByTestId('free-prices')).toBeNull()
    fireEvent.change(input, { target: { value: '0' } })
    expect(publish).toBeEnabled()                           // the same SKU made free again: confirmed for it already
    expect(seen.filter((r) => r.method === 'POST')).toHaveLength(0)
    fireEvent.click(publish)
    await waitFor(() => expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1), { timeout: 5000 })
    expect(await seen.find((r) => r.method === 'POST')!.json()).toMatchObject({ prices: [{ sku: 'flavor:name=h100-8x', unit_price: '0' }] })
  }, 20_000)

  it('shows support staff the books with New version disabled', async () => {
    stubApi({
      'GET /api/v1/me/': () => json(ME('support')),
      'GET /api/v1/price-books/': () => json({ results: [BOOK], next: null, previous: null }),
    })
    renderPage(<AdminPriceBooksPage />)
    expect(await screen.findByTestId('price-book')).toHaveTextContent('list prices')
    expect(screen.getByRole('button', { name: 'New version' })).toBeDisabled()
  })

  it('is Not found for a tenant', async () => {
    stubApi({ 'GET /api/v1/me/': () => json(ME('')) })
    renderPage(<AdminPriceBooksPage />)
    expect(await screen.findByRole('heading', { name: /Not found/ })).toBeInTheDocument()
  })
})

const INVOICE = { id: 'i1', organization: 'o1', period: '2026-11', period_start: '2026-11-01T00:00:00Z', period_end: '2026-12-01T00:00:00Z',
  timezone: 'UTC', currency: 'USD', status: 'draft', number: null, display_number: '', tax_rate: '0', reverse_charge: false,
  subtotal: '10.00', credits: '0.00', tax: '0.00', total: '10.00', credited: '0.00', amount_paid: '0.00', balance_due: '10.00',
  unpriced_seconds: 0, finalized_at: null, paid_at: null, payment_reference: '', voided_at: null, allowed_actions: ['finalize'],
  lines: [{ id: 'l1', kind: 'usage', sku: 'flavor:name=h100-8x', description: 'vm-1', billed_seconds: 1800, quantity: '0.500000',
    unit: 'hour', unit_price: '20.000000', amount: '10.00', pricing_model: 'on_demand', sla_tier: 'standard', resource_id: 'vm-1' }] }

describe('admin price books: no start in the past', () => {
  it('offers no instant before now for a new version and shows the server\'s refusal of a past start on the field', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/price-books/': () => json({ results: [BOOK], next: null, previous: null }),
      'POST /api/v1/price-books/': () => problem(400, 'price_book_backdated', 'A new version starts after now.',
        { effective_from: ['A new version of the USD prices starts after now.'] }),
    })
    renderPage(<AdminPriceBooksPage />)
    await screen.findByTestId('price-book')
    fireEvent.click(screen.getByRole('button', { name: 'New version' }))
    const dialog = await screen.findByRole('dialog', { name: 'New price book version' })
    const start = within(dialog).getByLabelText(/^Starts \(UTC\)/)
    const min = start.getAttribute('min')!
    expect(Math.abs(Date.parse(`${min}:00Z`) - Date.now())).toBeLessThan(120_000)
    fireEvent.change(start, { target: { value: '2026-06-01T00:00' } })
    fireEvent.change(within(within(dialog).getAllByTestId('price-row')[0]).getByRole('textbox'), { target: { value: '17.50' } })
    const publish = within(dialog).getByRole('button', { name: 'Publish version' })
    expect((start as HTMLInputElement).validity.rangeUnderflow).toBe(true)   // the browser refuses a past start
    fireEvent.click(publish)
    expect(seen.some((r) => r.method === 'POST')).toBe(false)
    fireEvent.change(start, { target: { value: nextMonthStart().slice(0, 16) } })
    fireEvent.click(publish)   // the server still decides (its clock): its refusal lands on the field
    expect(await within(dialog).findByText('A new version of the USD prices starts after now.')).toBeInTheDocument()
    expect(start).toHaveAttribute('aria-invalid', 'true')
  })
})

describe('admin invoice', () => {
  it('explains a line, finalizes a draft (billing admin) and then offers a credit note', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/invoices/i1/': () => json(INVOICE),
      'GET /api/v1/credit-notes/': () => json({ results: [], next: null, previous: null }),
      'GET /api/v1/usage/': () => json({ results: [{ id: 'u1', resource_type: 'instance', resource_id: 'vm-1', sku: 'x',
        pricing_model: 'on_demand', start: '2026-11-02T00:00:00Z', end: '2026-11-02T00:30:00Z', seconds: 1800 }], next: null, previous: null }),
      'POST /api/v1/invoices/i1/finalize/': () => json({ ...INVOICE, status: 'finalized', number: 7, display_number: 'INV-00000007',
        allowed_actions: ['pay', 'void', 'credit_note'] }),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    fireEvent.click(await screen.findByRole('button', { name: 'Explain vm-1' }))
    expect(await screen.findByTestId('explain-steps')).toHaveTextContent('0.5 hour × $20.00 / hour')
    expect(await screen.findByTestId('explain-usage')).toHaveTextContent('vm-1')
    expect(seen.some((r) => r.url.includes('invoice_line=l1'))).toBe(true)
    expect(screen.queryByRole('button', { name: 'Issue credit note' })).not.toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Finalize' }))
    fireEvent.click(within(await screen.findByRole('dialog')).getByRole('button', { name: 'Finalize' }))
    expect(await screen.findByRole('heading', { name: 'Invoice INV-00000007' })).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Issue credit note' })).toBeEnabled()
  })

  it('offers a billing admin only what the server allows now: no Finalize while the month runs', async () => {
    stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/invoices/i1/': () => json({ ...INVOICE, allowed_actions: [] }),
      'GET /api/v1/credit-notes/': () => json({ results: [], next: null, previous: null }),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    expect(await screen.findByRole('heading', { name: 'Draft invoice 2026-11' })).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'Finalize' })).not.toBeInTheDocument()
    expect(screen.queryByRole('button', { name: 'Issue credit note' })).not.toBeInTheDocument()
  })

  it('gives support staff no enabled write on the invoice', async () => {
    stubApi({
      'GET /api/v1/me/': () => json(ME('support')),
      'GET /api/v1/invoices/i1/': () => json(INVOICE),
      'GET /api/v1/credit-notes/': () => json({ results: [], next: null, previous: null }),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    expect(await screen.findByRole('button', { name: 'Finalize' })).toBeDisabled()
  })

  it('records a payment and voids an invoice as the server allows, each confirmed with its reference or reason', async () => {
    const FINAL = { ...INVOICE, status: 'finalized', number: 7, display_number: 'INV-2026-0007', allowed_actions: ['pay', 'void', 'credit_note'] }
    const seen = stubApi({
      'GET /api/v1/me/': () => json(ME('billing_admin')),
      'GET /api/v1/invoices/i1/': () => json(FINAL),
      'GET /api/v1/credit-notes/': () => json({ results: [], next: null, previous: null }),
      'POST /api/v1/invoices/i1/pay/': () => json({ ...FINAL, status: 'paid', amount_paid: '10.00', balance_due: '0.00', allowed_actions: ['credit_note'] }),
      'POST /api/v1/invoices/i1/void/': () => json({ ...FINAL, status: 'void', allowed_actions: [] }),
    })
    renderPage(<AdminInvoicePage />, { path: '/staff/billing/invoices/i1', route: '/staff/billing/invoices/:id' })
    fireEvent.click(await screen.findByRole('button', { name: 'Void' }))
    const voidDialog = await screen.findByRole('dialog', { name: 'Void INV-2026-0007?' })
    expect(within(voidDialog).getByRole('button', { name: 'Void invoice' })).toBeDisabled()
    fireEvent.click(within(voidDialog).getByRole('button', { name: 'Cancel' }))
    fireEvent.click(screen.getByRole('button', { name: 'Record payment' }))
    const pay = await screen.findByRole('dialog', { name: 'Record a payment of INV-2026-0007' })
    fireEvent.change(within(pay).getByLabelText(/^Reference/), { target: { value: 'SEPA 4711' } })
    fireEvent.click(within(pay).getByRole('button', { name: 'Record payment' }))
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Record payment' })).not.toBeInTheDocument())
    expect(screen.queryByRole('button', { name: 'Void' })).not.toBeInTheDocument()
    const post = seen.find((r) => r.url.endsWith('/pay/'))!
    expect(post.headers.get('Idempotency-Key')).toBeTruthy()
    expect(await post.json()).toEqual({ amount: '10.00', reference: 'SEPA 4711' })
  })
})
