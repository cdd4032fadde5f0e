// The admin billing screens' rules, kept apart from the screens so they are unit-tested (logic.test.ts).
import type { Schemas } from '../../../api/client'

export type PriceBook = Schemas['PriceBookOutput']
export type Price = Schemas['PriceOutput']
export type InvoiceRun = Schemas['InvoiceRunOutput']
export type CreditNote = Schemas['CreditNoteOutput']
export type SlaReport = Schemas['SlaReportOutput']

/** The staff role that writes billing (price books, invoice runs, finalize, credit notes); the others read. */
export const BILLING_WRITER = 'billing_admin'

const pad = (n: number) => String(n).padStart(2, '0')

/** The first instant of the month after `now`'s (UTC), as the API's ISO form: "2027-01-01T00:00:00Z". */
export function nextMonthStart(now: Date = new Date()): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-01T00:00:00Z`
}

/** The month before `now`'s (UTC) as an invoice period, "2026-11". */
export function lastMonth(now: Date = new Date()): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1))
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}`
}

/** "2026-12-05 05:57 UTC": an instant of the API as billing reads it (billing's periods and instants are UTC;
 * an organization's month is in its billing time zone, which its invoice names). */
export function utcText(iso: string | null | undefined): string {
  if (!iso) return '—'
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

/** A datetime-local input's value ("2027-01-01T00:00") read as UTC, in the API's form; '' stays '' (the server
 * then names the field). */
export function localInputToUtc(value: string): string {
  if (!value) return ''
  return value.length === 16 ? `${value}:00Z` : value.endsWith('Z') ? value : `${value}Z`
}

/** The key a price is in force for: (SKU, SLA tier, pricing model). */
export const priceKey = (p: { sku: string; sla_tier: string; pricing_model: string }) =>
  `${p.sku}|${p.sla_tier}|${p.pricing_model}`

/** Whether `book` is in force at `at`, will be later, or was replaced for every key it lists. */
export function bookState(book: PriceBook, books: PriceBook[], at: Date = new Date()): 'scheduled' | 'in force' | 'superseded' {
  if (new Date(book.effective_from) > at) return 'scheduled'
  const later = books.filter((b) => b.currency === book.currency && new Date(b.effective_from) > new Date(book.effective_from)
    && new Date(b.effective_from) <= at)
  const replaced = new Set(later.flatMap((b) => b.prices.map(priceKey)))
  return book.prices.length > 0 && book.prices.every((p) => replaced.has(priceKey(p))) ? 'superseded' : 'in force'
}

/** The price of `key` in force just before `at` in `currency`: from the latest book that starts before `at` and
 * lists the key (books overlay; docs/billing.md, "Price books"). */
export function priceBefore(books: PriceBook[], currency: string, key: string, at: string): Price | null {
  const earlier = books
    .filter((b) => b.currency === currency && new Date(b.effective_from) < new Date(at))
    .sort((a, b) => new Date(b.effective_from).getTime() - new Date(a.effective_from).getTime())
  for (const b of earlier) {
    const hit = b.prices.find((p) => priceKey(p) === key)
    if (hit) return hit
  }
  return null
}

export interface PriceRow {
  key: string
  sku: string
  sla_tier: string
  pricing_model: string
  unit: string
  old: string | null
  next: string
}

/** Rows of a new version's form: every key in force before `at` in `currency` (its price now, editable), so the
 * old and new price stand side by side. */
export function priceRows(books: PriceBook[], currency: string, at: string): PriceRow[] {
  const keys = new Map<string, Price>()
  for (const b of books.filter((x) => x.currency === currency && new Date(x.effective_from) < new Date(at)))
    for (const p of b.prices) keys.set(priceKey(p), p)
  return [...keys.keys()].sort().map((key) => {
    const old = priceBefore(books, currency, key, at) as Price
    return { key, sku: old.sku, sla_tier: old.sla_tier, pricing_model: old.pricing_model, unit: old.unit ?? 'hour',
             old: old.unit_price, next: trimPrice(old.unit_price) }
  })
}

/** "19.920000" → "19.92" (the API keeps six decimals). */
export function trimPrice(value: string): string {
  if (!value.includes('.')) return value
  const t = value.replace(/0+$/, '')
  const [whole, frac = ''] = t.split('.')
  return frac.length < 2 ? `${whole}.${frac.padEnd(2, '0')}` : t
}

/** The rows whose price changes: what the new version lists (the rest stay in force from the earlier books). */
export function changedPrices(rows: PriceRow[]) {
  return rows
    .filter((r) => r.next.trim() !== '' && (r.old === null || Number(r.next) !== Number(r.old)))
    .map((r) => ({ sku: r.sku, sla_tier: r.sla_tier, pricing_model: r.pricing_model as Price['pricing_model'],
                   unit: r.unit as Price['unit'], unit_price: r.next.trim() }))
}

/** The changed prices that would make their SKU free from the new version's start (a price of 0): the form asks
 * the billing admin to confirm them (a free SKU is a choice a provider makes, not a slip of the keyboard). */
export function freePrices(rows: PriceRow[]) {
  return changedPrices(rows).filter((p) => /^\d+(\.\d+)?$/.test(p.unit_price) && Number(p.unit_price) === 0)
}

/** An invoice run's progress in words, from its status and counts. */
export function runProgress(run: InvoiceRun): string {
  const counts = `${run.invoices_drafted ?? 0} drafted, ${run.invoices_finalized ?? 0} finalized`
  const held = (run.held_invoices as unknown[] | undefined)?.length ?? 0
  switch (run.status) {
    case 'pending': return 'Waiting for a worker'
    case 'running': return `Running: ${counts} so far`
    case 'completed': return `Completed: ${counts}${held ? `, ${held} held` : ''}`
    case 'failed': return `Failed${run.error ? `: ${run.error}` : ''}`
    default: return run.status ?? ''
  }
}

export const runFinished = (run: InvoiceRun | undefined) => run?.status === 'completed' || run?.status === 'failed'

interface Line {
  kind: string
  quantity?: string | null
  unit?: string | null
  unit_price?: string | null
  amount: string
  billed_seconds?: number | string | null
  pricing_model?: string
  sla_tier?: string
  description?: string
}

/** How an invoice line was computed, step by step, in the words of docs/billing.md ("Invoices", "Downtime and SLA
 * credits"); `fmt` formats an amount in the invoice's currency. */
export function explainLine(line: Line, fmt: (amount: string) => string): string[] {
  if (line.kind === 'sla_credit')
    return [
      'An SLA credit: the tier’s credit percentage of the resource’s recurring billed amount in the month its uptime fell below target.',
      `Credited here once, on the invoice after that month: ${fmt(line.amount)}.`,
      'The SLA reports below give the uptime, the downtime and the percentage it came from.',
    ]
  if (line.kind === 'adjustment')
    return [`A manual ${Number(line.amount) < 0 ? 'credit' : 'charge'} a billing admin added for the month: ${fmt(line.amount)}.`]
  const steps: string[] = []
  if (line.billed_seconds != null)
    steps.push(`Billed time: ${Number(line.billed_seconds).toLocaleString('en-US')} s — each run rounded up to the price’s billing increment and minimum; provider downtime is not charged.`)
  if (line.quantity && line.unit_price)
    steps.push(`${Number(line.quantity).toLocaleString('en-US', { maximumFractionDigits: 6 })} ${line.unit ?? ''} × ${fmt(line.unit_price)}${line.unit ? ` / ${line.unit}` : ''} (${(line.pricing_model ?? '').replace('_', '-')}, ${line.sla_tier ?? ''} tier)`.replace(/ {2,}/g, ' '))
  steps.push(`= ${fmt(line.amount)}, accumulated at full precision and rounded once, half-up, to the currency’s minor unit.`)
  steps.push('The usage records behind it are listed below.')
  return steps
}

/** What a credit note may still take: the invoice's total less what was already credited (before tax the server
 * checks the same; this only guides the form). */
export function creditable(invoice: { total?: string; credited?: string }): number {
  return Math.max(0, Number(invoice.total ?? 0) - Number(invoice.credited ?? 0))
}

/** The decimals of `currency`'s minor unit (USD and EUR 2, JPY 0; 2 for a code Intl does not know). */
export function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2
  } catch {
    return 2
  }
}

/** Why an amount typed for a credit note or a payment cannot be sent as it is, or undefined: it must be a plain
 * decimal above 0 in the currency's minor unit ("10.001 USD" is refused, never rounded to 10.00 behind the
 * person's back). The rest (more than the invoice allows) is the server's to refuse. */
export function amountProblem(value: string, currency: string): string | undefined {
  const v = value.trim()
  if (!v) return 'Enter an amount.'
  if (!/^\d+(\.\d+)?$/.test(v)) return `An amount is a number such as 120.50 (${v} is not).`
  if (Number(v) <= 0) return 'An amount is more than 0.'
  const digits = minorDigits(currency)
  const given = (v.split('.')[1] ?? '').replace(/0+$/, '').length
  if (given > digits)
    return digits === 0 ? `${currency} amounts have no decimals (${v} has ${given}).`
      : `${currency} amounts have at most ${digits} decimals (${v} has ${given}); nothing is rounded: type the amount to the cent.`
  return undefined
}
