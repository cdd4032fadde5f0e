import { Anchor, Badge, Button, Code, Group, Loader, Paper, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useParams } from 'react-router'
import { ApiError, api, unwrap, type InvoiceLine, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar, SearchFilter } from '../components/ListFilters'
import { NoMatch } from '../components/ResourceTable'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { money, notForRole, useInvoicePreview } from '../hooks/billing'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { NotFoundPage } from './NotFound'
import { shortId } from '../shortId'

export { money, notForRole }

/** "3.5 h" / "42 min" / "12 s": seconds as a person reads a duration. */
export function duration(seconds: number | string | null | undefined): string {
  const s = Number(seconds ?? 0)
  if (s >= 3600) return `${Number((s / 3600).toFixed(2))} h`
  if (s >= 60) return `${Number((s / 60).toFixed(1))} min`
  return `${Number(s.toFixed(0))} s`
}

type InvoiceStatus = Schemas['InvoiceOutputStatusEnum']
const INVOICE_STATUSES: InvoiceStatus[] = ['draft', 'finalized', 'paid', 'void']
const STATUS_COLORS: Record<string, string> = { draft: 'blue.8', finalized: 'violet.8', paid: 'teal.9', void: 'gray.7' }

export function InvoiceStatus({ status }: { status: string | undefined }) {
  return (
    <Badge color={STATUS_COLORS[status ?? ''] ?? 'gray.7'} variant="filled" data-testid="invoice-status">
      {status === 'draft' ? 'estimate' : status}
    </Badge>
  )
}

export function Totals({ invoice, currency }: { invoice: { subtotal?: string; credits?: string; tax?: string; tax_rate?: string; total?: string }; currency: string }) {
  return (
    <dl className="facts">
      <dt>Subtotal</dt>
      <dd>{money(invoice.subtotal, currency)}</dd>
      <dt>Credits</dt>
      <dd>{money(invoice.credits, currency)}</dd>
      <dt>Tax{invoice.tax_rate && Number(invoice.tax_rate) ? ` (${Number((Number(invoice.tax_rate) * 100).toFixed(2))} %)` : ''}</dt>
      <dd>{money(invoice.tax, currency)}</dd>
      <dt>Total</dt>
      <dd>
        <Text fw={700} span data-testid="total">
          {money(invoice.total, currency)}
        </Text>
      </dd>
    </dl>
  )
}

/** An invoice line's unit after a quantity, in words: "735 hours", "1 hour"; a count ("each") is the number alone. */
export function unitAfter(quantity: number, unit: string | null | undefined): string {
  if (!unit || unit === 'each') return ''
  return ['hour', 'day', 'month'].includes(unit) && quantity !== 1 ? `${unit}s` : unit
}

function quantity(line: InvoiceLine): string {
  if (line.quantity) {
    const n = Number(line.quantity)
    return `${n.toLocaleString('en-US', { maximumFractionDigits: 3 })} ${unitAfter(n, line.unit)}`.trim()
  }
  return line.billed_seconds ? duration(line.billed_seconds) : '—'
}

export function Lines({ lines, currency, onUsage, label }: { lines: InvoiceLine[]; currency: string; onUsage?: (line: InvoiceLine) => void; label: string }) {
  if (lines.length === 0)
    return (
      <Text c="dimmed" size="sm">
        No charges yet.
      </Text>
    )
  return (
      <Table striped aria-label={label}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Description</Table.Th>
            <Table.Th>SKU</Table.Th>
            <Table.Th>Quantity</Table.Th>
            <Table.Th ta="right" style={{ whiteSpace: 'nowrap' }}>
              Unit price
            </Table.Th>
            <Table.Th ta="right">Amount</Table.Th>
            {onUsage && (
              <Table.Th>
                <span className="visually-hidden">Usage</span>
              </Table.Th>
            )}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {lines.map((line) => (
            <Table.Tr key={line.id} data-testid="invoice-line">
              <Table.Td>
                {line.description || line.kind}
                {line.kind !== 'usage' && (
                  <Text size="xs" c="dimmed">
                    {line.kind === 'sla_credit' ? 'SLA credit' : line.kind}
                  </Text>
                )}
              </Table.Td>
              <Table.Td>{line.sku ? <Code>{line.sku}</Code> : '—'}</Table.Td>
              <Table.Td>{quantity(line)}</Table.Td>
              <Table.Td ta="right">{line.unit_price ? `${money(line.unit_price, currency, 4)}${line.unit && line.unit !== 'each' ? ` / ${line.unit}` : ''}` : '—'}</Table.Td>
              <Table.Td ta="right">{money(line.amount, currency)}</Table.Td>
              {onUsage && (
                <Table.Td ta="right">
                  {line.kind === 'usage' && (
                    <Button variant="default" size="xs" onClick={() => onUsage(line)} aria-label={`Usage behind ${line.description || line.sku}`}>
                      Usage
                    </Button>
                  )}
                </Table.Td>
              )}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
  )
}

export type CreditNote = Schemas['CreditNoteOutput']
export type SlaReport = Schemas['SlaReportOutput']

/** Credit notes with their PDF and CSV downloads (`/credit-notes/{id}/pdf/`, `/csv/`, the same session);
 * `invoiceName` turns an invoice id into its number where the caller knows it (else the column is left out). */
export function CreditNoteTable({ notes, invoiceName }: { notes: CreditNote[]; invoiceName?: (id: string) => string | undefined }) {
  return (
    <Table striped withTableBorder aria-label="Credit notes">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Credit note</Table.Th>
          {invoiceName && <Table.Th>Corrects</Table.Th>}
          <Table.Th>Issued</Table.Th>
          <Table.Th>Reason</Table.Th>
          <Table.Th ta="right">Amount</Table.Th>
          <Table.Th ta="right">Total</Table.Th>
          <Table.Th><span className="visually-hidden">Downloads</span></Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {notes.map((n) => (
          <Table.Tr key={n.id} data-testid="credit-note">
            <Table.Td>{n.display_number}</Table.Td>
            {invoiceName && (
              <Table.Td>
                <Anchor component={Link} to={`/billing/invoices/${n.invoice}`} size="sm">
                  {invoiceName(n.invoice) ?? 'the invoice'}
                </Anchor>
              </Table.Td>
            )}
            <Table.Td>{n.issued_at ? new Date(n.issued_at).toLocaleString() : '—'}</Table.Td>
            <Table.Td>{n.reason}</Table.Td>
            <Table.Td ta="right">{money(n.amount, n.currency)}</Table.Td>
            <Table.Td ta="right">{money(n.total, n.currency)}</Table.Td>
            <Table.Td ta="right" style={{ whiteSpace: 'nowrap' }}>
              <Anchor href={`/api/v1/credit-notes/${n.id}/pdf/`} download size="sm" c="indigo.9" aria-label={`PDF of ${n.display_number}`}>PDF</Anchor>
              {' · '}
              <Anchor href={`/api/v1/credit-notes/${n.id}/csv/`} download size="sm" c="indigo.9" aria-label={`CSV of ${n.display_number}`}>CSV</Anchor>
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  )
}

export interface SlaTotals {
  currency: string
  /** Credits the next invoice will carry (`applied_invoice` null, amount > 0). */
  pending: number
  /** Credits already on an invoice. */
  granted: number
  downtimeMinutes: number
  /** Resources below their tier's target. */
  belowTarget: number
}

/** The sums of SLA reports (one currency: the first report's; the organization bills in one). */
export function slaTotals(reports: SlaReport[]): SlaTotals {
  const out: SlaTotals = { currency: reports[0]?.currency ?? 'USD', pending: 0, granted: 0, downtimeMinutes: 0, belowTarget: 0 }
  for (const r of reports) {
    const credit = Number(r.credit_amount)
    if (credit > 0) {
      if (r.applied_invoice) out.granted += credit
      else out.pending += credit
    }
    out.downtimeMinutes += Number(r.downtime_minutes)
    if (Number(r.uptime_pct) < Number(r.target_uptime_pct)) out.belowTarget += 1
  }
  return out
}

/** "99.95 %": an uptime percentage of the API (up to 8 decimals) as a person reads it. */
export function pct(value: string): string {
  return `${Number(Number(value).toFixed(4))} %`
}

/** The SLA report of the organization (`/sla-reports/?organization=`, server-paged, filterable by month): per
 * resource and month with provider-caused downtime, its availability against the tier's target, the downtime, and
 * the credit it earned, pending (credited on the next invoice) or granted (on which invoice). */
function SlaReportSection({ organization, invoiceName, enabled }: { organization: string; invoiceName: (id: string) => string | undefined; enabled: boolean }) {
  const [period, setPeriod] = useState('')
  const reports = usePaged(
    ['sla-reports', organization, period],
    (cursor) => unwrap(api.GET('/api/v1/sla-reports/', { params: { query: { organization, cursor, page_size: 50, ...(period ? { period } : {}) } } })),
    { enabled: Boolean(organization) && enabled },
  )
  const rows = reports.data?.results ?? []
  const totals = slaTotals(rows)
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="sla-title" data-testid="sla-report">
      <Stack gap="sm">
        <Group justify="space-between" align="flex-end">
          <Title order={3} size="h4" id="sla-title">SLA report</Title>
          <TextInput type="month" label="Month" size="xs" value={period} onChange={(e) => { reports.reset(); setPeriod(e.currentTarget.value) }} />
        </Group>
        <Text size="sm" c="dimmed">
          Resources that had downtime the provider caused, per month: their availability against the SLA tier’s
          target and the credit it earns. Each month’s invoice run measures the month; a credit is pending until the
          next invoice carries it, then granted.
        </Text>
        <ProblemAlert error={reports.error} />
        {reports.isSuccess && rows.length === 0 && !reports.hasPrevious ? (
          <Text size="sm" c="dimmed" data-testid="sla-empty">
            {period ? `No provider-caused downtime was measured for ${period}.` : 'No provider-caused downtime has been measured: every resource met its SLA.'}
          </Text>
        ) : (
          <>
            <SimpleGrid cols={{ base: 2, md: 4 }} data-testid="sla-totals">
              <div><Text size="xs" c="dimmed">Pending credits</Text><Text fw={700} data-testid="sla-pending">{money(String(totals.pending.toFixed(2)), totals.currency)}</Text></div>
              <div><Text size="xs" c="dimmed">Granted credits</Text><Text fw={700} data-testid="sla-granted">{money(String(totals.granted.toFixed(2)), totals.currency)}</Text></div>
              <div><Text size="xs" c="dimmed">Downtime</Text><Text fw={700}>{totals.downtimeMinutes.toLocaleString('en-US')} min</Text></div>
              <div><Text size="xs" c="dimmed">Below target</Text><Text fw={700}>{totals.belowTarget} of {rows.length}</Text></div>
            </SimpleGrid>
            {reports.hasNext || reports.hasPrevious ? <Text size="xs" c="dimmed">Totals of the reports on this page.</Text> : null}
            <Table striped aria-label="SLA report">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Month</Table.Th>
                  <Table.Th>Resource</Table.Th>
                  <Table.Th>Tier</Table.Th>
                  <Table.Th ta="right">Availability</Table.Th>
                  <Table.Th ta="right">Downtime</Table.Th>
                  <Table.Th ta="right">Credit</Table.Th>
                  <Table.Th>Status</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {rows.map((r) => {
                  const below = Number(r.uptime_pct) < Number(r.target_uptime_pct)
                  const credit = Number(r.credit_amount) > 0
                  return (
                    <Table.Tr key={r.id} data-testid="sla-row">
                      <Table.Td>{r.period}</Table.Td>
                      <Table.Td>
                        {r.resource_type === 'instance'
                          ? <Anchor component={Link} to={`/instances/${r.resource_id}`} size="sm">instance {shortId(r.resource_id)}</Anchor>
                          : <>{r.resource_type} <Code>{shortId(r.resource_id)}</Code></>}
                      </Table.Td>
                      <Table.Td>{r.sla_tier}</Table.Td>
                      <Table.Td ta="right">
                        <Text span c={below ? 'red.9' : undefined} fw={below ? 700 : undefined}>{pct(r.uptime_pct)}</Text>
                        <Text size="xs" c="dimmed">target {pct(r.target_uptime_pct)}</Text>
                      </Table.Td>
                      <Table.Td ta="right">{Number(r.downtime_minutes).toLocaleString('en-US')} of {Number(r.held_minutes).toLocaleString('en-US')} min</Table.Td>
                      <Table.Td ta="right">
                        {money(r.credit_amount, r.currency)}
                        <Text size="xs" c="dimmed">{Number(r.credit_pct)} % of {money(r.billed_amount, r.currency)}</Text>
                      </Table.Td>
                      <Table.Td data-testid="sla-status">
                        {!credit ? 'No credit (within the schedule)' : r.applied_invoice ? (
                          <>Granted on{' '}
                            <Anchor component={Link} to={`/billing/invoices/${r.applied_invoice}`} size="sm">
                              {invoiceName(r.applied_invoice) ?? 'an invoice'}
                            </Anchor>
                          </>
                        ) : 'Pending: on the next invoice'}
                      </Table.Td>
                    </Table.Tr>
                  )
                })}
              </Table.Tbody>
            </Table>
          </>
        )}
        <Pager pageNumber={reports.pageNumber} hasNext={reports.hasNext} hasPrevious={reports.hasPrevious}
          onNext={reports.goNext} onPrevious={reports.goPrevious} loading={reports.isFetching} />
      </Stack>
    </Paper>
  )
}

/** Billing (`/billing`): the organization's month to date (`/invoices/preview/`) and its invoices (`/invoices/`),
 * its credit notes (`/credit-notes/`, PDF and CSV) and its SLA report (`/sla-reports/`), for owners, admins and
 * billing members; others get the server's refusal shown as "not available". */
export function BillingPage() {
  const { organization } = useScope()
  const oid = organization?.id ?? ''
  const preview = useInvoicePreview(oid)
  const allowed = !notForRole(preview.error)
  const filters = useListFilters({ status: null as InvoiceStatus | null, period: '' })
  const invoices = usePaged(
    ['invoices', oid, filters.query],
    (cursor) => unwrap(api.GET('/api/v1/invoices/', { params: { query: { organization: oid, ...filters.query, cursor, page_size: 24 } } })),
    // the preview's answer says whether the caller reads this organization's bills
    { enabled: Boolean(oid) && (preview.isSuccess || (preview.isError && allowed)) },
  )
  const readable = Boolean(oid) && (preview.isSuccess || (preview.isError && allowed))
  const notes = usePaged(
    ['credit-notes', oid],
    (cursor) => unwrap(api.GET('/api/v1/credit-notes/', { params: { query: { organization: oid, cursor, page_size: 24 } } })),
    { enabled: readable },
  )

  if (!allowed)
    return (
      <Stack>
        <Title order={2}>Billing</Title>
        <div data-testid="billing-not-available">
          <EmptyState title="Billing is not available for your role">
            Only the organization’s owners, admins and billing members read its bills and usage
            {organization?.role ? ` (your role in ${organization.name} is ${organization.role})` : ''}. The server answered: “
            {preview.error instanceof ApiError ? (preview.error.errors.organization?.join(' ') ?? preview.error.detail) : ''}”
          </EmptyState>
        </div>
      </Stack>
    )

  const p = preview.data
  const rows = invoices.data?.results ?? []
  const noteRows = notes.data?.results ?? []
  const invoiceName = (id: string) => rows.find((i) => i.id === id)?.display_number
  return (
    <Stack>
      <Title order={2}>Billing</Title>
      <Paper withBorder p="md" component="section" aria-labelledby="month-to-date" data-testid="month-to-date">
        <Stack gap="sm">
          <Group justify="space-between">
            <Title order={3} size="h4" id="month-to-date">
              Month to date{p ? ` — ${p.period}` : ''}
            </Title>
            {p && <InvoiceStatus status={p.status} />}
          </Group>
          <ProblemAlert error={preview.error} title="The month to date is not available" />
          {preview.isPending && <Loader role="status" size="sm" aria-label="Loading the month to date" />}
          {p && (
            <>
              <Text size="sm" c="dimmed">
                {p.status === 'draft'
                  ? 'An estimate of this month’s invoice from the usage recorded so far; it changes until the month closes.'
                  : 'This month’s invoice is already issued.'}{' '}
                {p.usage_until ? `Usage recorded until ${new Date(p.usage_until).toLocaleString()}.` : 'No usage recorded this month yet.'}{' '}
                Usage is recorded after each metering period ends (every hour, a few minutes past it, unless your
                provider set another period): what runs now appears here after the next one.
                {Number(p.unpriced_seconds) > 0 && ` ${duration(p.unpriced_seconds)} of usage has no price yet and is not in the total.`}
              </Text>
              <SimpleGrid cols={{ base: 1, md: 3 }}>
                <Paper withBorder p="md">
                  <Totals invoice={p} currency={p.currency} />
                </Paper>
                <div style={{ gridColumn: 'span 2' }}>
                  <Lines lines={p.lines} currency={p.currency} label="Month-to-date charges" />
                </div>
              </SimpleGrid>
            </>
          )}
        </Stack>
      </Paper>
      <Title order={3} size="h4">
        Invoices
      </Title>
      <FilterBar label="Filter invoices">
        <ChoiceFilter filters={filters} param="status" label="Filter by status" placeholder="Any status" data={INVOICE_STATUSES} />
        <SearchFilter filters={filters} param="period" label="Filter by month" placeholder="Month, e.g. 2026-11" w={180} />
      </FilterBar>
      <ProblemAlert error={invoices.error} title={fieldError(invoices.error, 'period') ? 'Type the month as YYYY-MM' : undefined} />
      {invoices.isSuccess && rows.length === 0 && !invoices.hasPrevious ? filters.active ? <NoMatch noun="invoices" filters={filters} /> : (
        <EmptyState title="No invoices yet">
          An invoice is issued after each month closes; the month to date above shows what this one comes to so far.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Invoices">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Invoice</Table.Th>
              <Table.Th>Period</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th ta="right">Total</Table.Th>
              <Table.Th ta="right">Balance due</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((invoice) => (
              <Table.Tr key={invoice.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/billing/invoices/${invoice.id}`}>
                    {invoice.display_number}
                  </Anchor>
                </Table.Td>
                <Table.Td>{invoice.period}</Table.Td>
                <Table.Td>
                  <InvoiceStatus status={invoice.status} />
                </Table.Td>
                <Table.Td ta="right">{money(invoice.total, invoice.currency)}</Table.Td>
                <Table.Td ta="right">{money(invoice.balance_due, invoice.currency)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={invoices.pageNumber}
        hasNext={invoices.hasNext}
        hasPrevious={invoices.hasPrevious}
        onNext={invoices.goNext}
        onPrevious={invoices.goPrevious}
        loading={invoices.isFetching}
      />
      <Title order={3} size="h4" id="credit-notes-title">
        Credit notes
      </Title>
      <ProblemAlert error={notes.error} />
      {notes.isSuccess && noteRows.length === 0 && !notes.hasPrevious ? (
        <Text size="sm" c="dimmed" data-testid="credit-notes-empty">
          No credit notes. When the provider corrects an issued invoice (a refund or a goodwill credit), the credit note
          appears here with its PDF and CSV.
        </Text>
      ) : (
        noteRows.length > 0 && <CreditNoteTable notes={noteRows} invoiceName={invoiceName} />
      )}
      <Pager pageNumber={notes.pageNumber} hasNext={notes.hasNext} hasPrevious={notes.hasPrevious}
        onNext={notes.goNext} onPrevious={notes.goPrevious} loading={notes.isFetching} />
      <SlaReportSection organization={oid} invoiceName={invoiceName} enabled={readable} />
    </Stack>
  )
}

/** One invoice (`/invoices/{id}/`): totals, lines, PDF and CSV downloads, and the usage records behind a line
 * (`/usage/?invoice_line=`). */
export function InvoiceDetailPage() {
  const { id = '' } = useParams()
  const [line, setLine] = useState<InvoiceLine | null>(null)
  const invoice = useQuery({
    queryKey: ['invoice', id],
    queryFn: () => unwrap(api.GET('/api/v1/invoices/{id}/', { params: { path: { id } } })),
  })
  const usage = usePaged(
    ['usage', line?.id ?? ''],
    (cursor) => unwrap(api.GET('/api/v1/usage/', { params: { query: { invoice_line: line?.id, cursor, page_size: 50 } } })),
    { enabled: Boolean(line) },
  )

  if (invoice.error instanceof ApiError && invoice.error.status === 404) return <NotFoundPage what="invoice" />
  if (invoice.isPending) return <Loader role="status" aria-label="Loading the invoice" />
  if (invoice.isError) return <ProblemAlert error={invoice.error} />
  const inv = invoice.data
  const records = usage.data?.results ?? []

  return (
    <Stack>
      <Anchor component={Link} to="/billing" size="sm">
        ← Billing
      </Anchor>
      <Group justify="space-between">
        <Group>
          <Title order={2}>Invoice {inv.display_number}</Title>
          <InvoiceStatus status={inv.status} />
        </Group>
        <Group gap="xs">
          <Button component="a" variant="default" href={`/api/v1/invoices/${inv.id}/pdf/`} download>
            Download PDF
          </Button>
          <Button component="a" variant="default" href={`/api/v1/invoices/${inv.id}/csv/`} download>
            Download CSV
          </Button>
        </Group>
      </Group>
      <SimpleGrid cols={{ base: 1, sm: 2 }}>
        <Paper withBorder p="md">
          <dl className="facts">
            <dt>Period</dt>
            <dd>
              {inv.period} ({new Date(inv.period_start).toLocaleDateString()} – {new Date(inv.period_end).toLocaleDateString()},{' '}
              {inv.timezone})
            </dd>
            <dt>Issued</dt>
            <dd>{inv.finalized_at ? new Date(inv.finalized_at).toLocaleString() : '—'}</dd>
            <dt>Paid</dt>
            <dd>{inv.paid_at ? `${new Date(inv.paid_at).toLocaleString()}${inv.payment_reference ? ` (${inv.payment_reference})` : ''}` : '—'}</dd>
            <dt>Credited</dt>
            <dd>{money(inv.credited, inv.currency)}</dd>
            <dt>Balance due</dt>
            <dd>{money(inv.balance_due, inv.currency)}</dd>
          </dl>
        </Paper>
        <Paper withBorder p="md">
          <Totals invoice={inv} currency={inv.currency} />
        </Paper>
      </SimpleGrid>
      <Title order={3} size="h4">
        Lines
      </Title>
      <Lines lines={inv.lines} currency={inv.currency} label="Invoice lines" onUsage={(l) => {
        usage.reset()
        setLine(l)
      }} />
      {line && (
        <Paper withBorder p="md" component="section" aria-labelledby="usage-title" data-testid="usage-records">
          <Stack gap="sm">
            <Group justify="space-between">
              <Title order={3} size="h4" id="usage-title">
                Usage behind “{line.description || line.sku}”
              </Title>
              <Button variant="subtle" size="xs" onClick={() => setLine(null)}>
                Close
              </Button>
            </Group>
            <ProblemAlert error={usage.error} />
            {usage.isPending && <Loader role="status" size="sm" aria-label="Loading the usage records" />}
            {usage.isSuccess && records.length === 0 && (
              <Text size="sm" c="dimmed">
                No usage records behind this line.
              </Text>
            )}
            {records.length > 0 && (
              <Table striped aria-label="Usage records">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Resource</Table.Th>
                    <Table.Th>SKU</Table.Th>
                    <Table.Th>Pricing</Table.Th>
                    <Table.Th>Start</Table.Th>
                    <Table.Th>End</Table.Th>
                    <Table.Th ta="right">Duration</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {records.map((record) => (
                    <Table.Tr key={record.id}>
                      <Table.Td>
                        {record.resource_type} <Code>{record.resource_id}</Code>
                      </Table.Td>
                      <Table.Td>
                        <Code>{record.sku}</Code>
                      </Table.Td>
                      <Table.Td>{record.pricing_model.replace('_', '-')}</Table.Td>
                      <Table.Td>{new Date(record.start).toLocaleString()}</Table.Td>
                      <Table.Td>{new Date(record.end).toLocaleString()}</Table.Td>
                      <Table.Td ta="right">{duration(record.seconds)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            )}
            <Pager
              pageNumber={usage.pageNumber}
              hasNext={usage.hasNext}
              hasPrevious={usage.hasPrevious}
              onNext={usage.goNext}
              onPrevious={usage.goPrevious}
              loading={usage.isFetching}
            />
          </Stack>
        </Paper>
      )}
    </Stack>
  )
}
