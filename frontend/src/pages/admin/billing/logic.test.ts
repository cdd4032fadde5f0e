import { describe, expect, it } from 'vitest'
import {
  bookState, changedPrices, creditable, explainLine, lastMonth, localInputToUtc, nextMonthStart, priceBefore, priceRows, runProgress,
  trimPrice, utcText, type InvoiceRun, type PriceBook,
} from './logic'

const price = (book: string, sku: string, unit_price: string, effective_from: string) => ({
  id: `${book}-${sku}`, book, sku, sla_tier: 'standard', pricing_model: 'on_demand' as const, currency: 'USD', unit: 'hour' as const,
  unit_price, billing_increment_seconds: 1, minimum_seconds: 60, effective_from,
})
const book = (id: string, effective_from: string, prices: [string, string][], currency = 'USD'): PriceBook => ({
  id, name: id, currency, effective_from, notes: '', prices: prices.map(([s, p]) => price(id, s, p, effective_from)),
})
const JAN = book('jan', '2026-01-01T00:00:00Z', [['flavor:name=a', '1.000000'], ['flavor:name=b', '2.000000']])
const MAR = book('mar', '2026-03-01T00:00:00Z', [['flavor:name=a', '1.500000']])
const EUR = book('eur', '2026-01-01T00:00:00Z', [['flavor:name=a', '9.000000']], 'EUR')
const BOOKS = [JAN, MAR, EUR]

describe('billing admin logic', () => {
  it('knows next month and last month in UTC, across a year end', () => {
    expect(nextMonthStart(new Date('2026-12-04T02:50:00Z'))).toBe('2027-01-01T00:00:00Z')
    expect(nextMonthStart(new Date('2026-01-31T23:59:59Z'))).toBe('2026-02-01T00:00:00Z')
    expect(lastMonth(new Date('2027-01-01T00:00:00Z'))).toBe('2026-12')
    expect(lastMonth(new Date('2026-12-04T00:00:00Z'))).toBe('2026-11')
    expect(localInputToUtc('2027-01-01T00:00')).toBe('2027-01-01T00:00:00Z')
    expect(localInputToUtc('')).toBe('')
  })

  it('finds the price in force before a start from the latest book listing the key (books overlay)', () => {
    expect(priceBefore(BOOKS, 'USD', 'flavor:name=a|standard|on_demand', '2026-04-01T00:00:00Z')?.unit_price).toBe('1.500000')
    expect(priceBefore(BOOKS, 'USD', 'flavor:name=b|standard|on_demand', '2026-04-01T00:00:00Z')?.unit_price).toBe('2.000000')
    expect(priceBefore(BOOKS, 'USD', 'flavor:name=a|standard|on_demand', '2026-03-01T00:00:00Z')?.unit_price).toBe('1.000000')
    expect(priceBefore(BOOKS, 'USD', 'flavor:name=a|standard|on_demand', '2026-01-01T00:00:00Z')).toBeNull()
  })

  it('lays out a new version beside the prices now and sends only the changed ones', () => {
    const rows = priceRows(BOOKS, 'USD', '2026-04-01T00:00:00Z')
    expect(rows.map((r) => [r.sku, r.old, r.next])).toEqual([
      ['flavor:name=a', '1.500000', '1.50'], ['flavor:name=b', '2.000000', '2.00']])
    expect(changedPrices(rows)).toEqual([])
    rows[1].next = '2.25'
    expect(changedPrices(rows)).toEqual([
      { sku: 'flavor:name=b', sla_tier: 'standard', pricing_model: 'on_demand', unit: 'hour', unit_price: '2.25' }])
    rows[0].next = '1.5'   // the same number, typed differently: unchanged
    expect(changedPrices(rows)).toHaveLength(1)
  })

  it('says whether a book is scheduled, in force or superseded', () => {
    const now = new Date('2026-04-15T00:00:00Z')
    const MAY = book('may', '2026-05-01T00:00:00Z', [['flavor:name=b', '3.000000']])
    expect(bookState(MAY, [...BOOKS, MAY], now)).toBe('scheduled')
    expect(bookState(MAR, [...BOOKS, MAY], now)).toBe('in force')
    expect(bookState(JAN, [...BOOKS, MAY], now)).toBe('in force')   // b is still January's
    expect(bookState(JAN, [...BOOKS, MAY], new Date('2026-06-01T00:00:00Z'))).toBe('superseded')
  })

  it('trims the API six decimals to what a person reads', () => {
    expect(trimPrice('19.920000')).toBe('19.92')
    expect(trimPrice('2.000000')).toBe('2.00')
    expect(trimPrice('0.123456')).toBe('0.123456')
  })

  it('tells an invoice run’s progress', () => {
    const run = (status: InvoiceRun['status'], extra: Partial<InvoiceRun> = {}): InvoiceRun =>
      ({ id: 'r', period: '2026-11', status, created_at: '', invoices_drafted: 3, invoices_finalized: 2, held_invoices: [], ...extra })
    expect(runProgress(run('pending'))).toBe('Waiting for a worker')
    expect(runProgress(run('running'))).toBe('Running: 3 drafted, 2 finalized so far')
    expect(runProgress(run('completed', { held_invoices: ['x'] }))).toBe('Completed: 3 drafted, 2 finalized, 1 held')
    expect(runProgress(run('failed', { error: 'database_error' }))).toBe('Failed: database_error')
  })

  it('explains a usage line from its quantity, price and rounding', () => {
    const steps = explainLine({ kind: 'usage', quantity: '2.500000', unit: 'hour', unit_price: '4.000000', amount: '10.00',
      billed_seconds: 9000, pricing_model: 'on_demand', sla_tier: 'standard' }, (a) => `$${Number(a).toFixed(2)}`)
    expect(steps[0]).toContain('9,000 s')
    expect(steps[1]).toBe('2.5 hour × $4.00 / hour (on-demand, standard tier)')
    expect(steps[2]).toMatch(/^= \$10\.00, .*half-up/)
    expect(explainLine({ kind: 'sla_credit', amount: '-711.00' }, (a) => a)[1]).toContain('-711.00')
    expect(explainLine({ kind: 'adjustment', amount: '-5.00' }, (a) => a)[0]).toContain('credit')
  })

  it('bounds a credit note by what was not credited yet', () => {
    expect(creditable({ total: '100.00', credited: '30.00' })).toBe(70)
    expect(creditable({ total: '10.00', credited: '10.00' })).toBe(0)
  })
  it('says a billing instant in UTC, whatever the browser\'s time zone', () => {
    expect(utcText('2026-12-05T05:57:31Z')).toBe('2026-12-05 05:57 UTC')
    expect(utcText('2026-12-31T23:30:00-02:00')).toBe('2027-01-01 01:30 UTC')
    expect(utcText(null)).toBe('—')
  })
})
