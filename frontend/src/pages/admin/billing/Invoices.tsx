import { Anchor, Button, Code, Group, List, Modal, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Textarea, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useParams } from 'react-router'
import { ApiError, api, unwrap, type Invoice, type InvoiceLine } from '../../../api/client'
import { ConfirmButton } from '../../../components/ConfirmButton'
import { ProblemAlert, fieldError } from '../../../components/ProblemAlert'
import { WriteButton } from '../../../components/WriteButton'
import { useSubmitOnce } from '../../../hooks/useSubmitOnce'
import { money } from '../../../hooks/billing'
import { CreditNoteTable, InvoiceStatus, Totals, duration } from '../../Billing'
import { NotFoundPage } from '../../NotFound'
import { BillingTabs, READ_ONLY_STAFF, useBillingRole } from './common'
import { amountProblem, creditable, explainLine, utcText, type CreditNote } from './logic'
import { useOrgNames } from '../organizations'

/** Invoices as rows: number (a link to the staff invoice), organization, period, status, total, balance. */
export function InvoiceTable({ invoices }: { invoices: Invoice[] }) {
  const orgName = useOrgNames()
  if (invoices.length === 0) return <Text c="dimmed" size="sm">No invoices.</Text>
  return (
    <Table striped withTableBorder aria-label="Invoices">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Invoice</Table.Th><Table.Th>Organization</Table.Th><Table.Th>Period</Table.Th>
          <Table.Th>Status</Table.Th><Table.Th ta="right">Total</Table.Th><Table.Th ta="right">Balance due</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {invoices.map((inv) => (
          <Table.Tr key={inv.id} data-testid="staff-invoice" data-organization={orgName(inv.organization)}>
            <Table.Td>
              <Anchor component={Link} c="indigo.9" to={`/staff/billing/invoices/${inv.id}`}>
                {inv.display_number || `Draft ${inv.period}`}
              </Anchor>
            </Table.Td>
            <Table.Td>{orgName(inv.organization)}</Table.Td>
            <Table.Td>{inv.period}</Table.Td>
            <Table.Td><InvoiceStatus status={inv.status} /></Table.Td>
            <Table.Td ta="right">{money(inv.total, inv.currency)}</Table.Td>
            <Table.Td ta="right">{money(inv.balance_due, inv.currency)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  )
}

/** `/staff/billing/invoices`: every organization's invoices (drafts included), by period and status. */
export function AdminInvoicesPage() {
  const role = useBillingRole()
  const [period, setPeriod] = useState('')
  const [status, setStatus] = useState<string | null>(null)
  const invoices = useQuery({
    queryKey: ['staff', 'invoices', period, status],
    queryFn: () => unwrap(api.GET('/api/v1/invoices/', { params: { query: {
      page_size: 100, ...(/^\d{4}-\d{2}$/.test(period) ? { period } : {}), ...(status ? { status: status as never } : {}),
    } } })),
    enabled: role.staff,
  })
  if (role.pending) return null
  if (!role.staff || (invoices.error instanceof ApiError && invoices.error.status === 404)) return <NotFoundPage />
  return (
    <Stack>
      <Title order={2}>Billing: invoices</Title>
      <BillingTabs />
      <Group align="end">
        <TextInput label="Period" placeholder="YYYY-MM" w={160} value={period} onChange={(e) => setPeriod(e.currentTarget.value)} />
        <Select label="Status" placeholder="Any status" clearable w={180} value={status} onChange={setStatus}
          data={['draft', 'finalized', 'paid', 'void']} />
      </Group>
      <ProblemAlert error={invoices.error} />
      {invoices.data && <InvoiceTable invoices={invoices.data.results} />}
    </Stack>
  )
}

/** How one line was computed, with the usage records behind a usage line (`/usage/?invoice_line=`) and the SLA
 * reports behind an SLA credit (`/sla-reports/?resource_id=`). */
function Explain({ invoice, line, onClose }: { invoice: Invoice; line: InvoiceLine; onClose: () => void }) {
  const fmt = (a: string) => money(a, invoice.currency)
  const usage = useQuery({
    queryKey: ['staff', 'usage', line.id],
    queryFn: () => unwrap(api.GET('/api/v1/usage/', { params: { query: { invoice_line: line.id, page_size: 100 } } })),
    enabled: line.kind === 'usage',
  })
  const sla = useQuery({
    queryKey: ['staff', 'sla', invoice.organization, line.resource_id],
    queryFn: () => unwrap(api.GET('/api/v1/sla-reports/', { params: { query: {
      organization: invoice.organization, resource_id: line.resource_id ?? undefined, page_size: 50 } } })),
    enabled: line.kind === 'sla_credit',
  })
  const reports = (sla.data?.results ?? []).filter((r) => r.applied_invoice === invoice.id || !r.applied_invoice)
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="explain-title" data-testid="explain">
      <Stack gap="sm">
        <Group justify="space-between">
          <Title order={3} size="h4" id="explain-title">How “{line.description || line.sku}” was computed</Title>
          <Button variant="subtle" size="xs" onClick={onClose}>Close</Button>
        </Group>
        <List size="sm" data-testid="explain-steps">
          {explainLine(line, fmt).map((s) => <List.Item key={s}>{s}</List.Item>)}
        </List>
        <ProblemAlert error={usage.error ?? sla.error} />
        {usage.data && (
          <Table striped aria-label="Usage records behind the line">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Resource</Table.Th><Table.Th>Start</Table.Th><Table.Th>End</Table.Th><Table.Th ta="right">Duration</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {usage.data.results.map((u) => (
                <Table.Tr key={u.id} data-testid="explain-usage">
                  <Table.Td>{u.resource_type} <Code>{u.resource_id}</Code></Table.Td>
                  <Table.Td>{utcText(u.start)}</Table.Td>
                  <Table.Td>{utcText(u.end)}</Table.Td>
                  <Table.Td ta="right">{duration(u.seconds)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
        {usage.data && usage.data.results.length === 0 && <Text size="sm" c="dimmed">No usage records behind this line.</Text>}
        {sla.data && (
          <Table striped aria-label="SLA reports behind the credit">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Month</Table.Th><Table.Th ta="right">Downtime</Table.Th><Table.Th ta="right">Uptime</Table.Th>
                <Table.Th ta="right">Credit</Table.Th><Table.Th ta="right">Amount</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {reports.map((r) => (
                <Table.Tr key={r.id}>
                  <Table.Td>{r.period}</Table.Td>
                  <Table.Td ta="right">{r.downtime_minutes} of {r.held_minutes} min</Table.Td>
                  <Table.Td ta="right">{r.uptime_pct} % (target {r.target_uptime_pct} %)</Table.Td>
                  <Table.Td ta="right">{r.credit_pct} % of {money(r.billed_amount, r.currency)}</Table.Td>
                  <Table.Td ta="right">{money(r.credit_amount, r.currency)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </Stack>
    </Paper>
  )
}

/** The credit-note form: amount before tax (tax at the invoice's rate is added) and a reason. */
function CreditNoteButton({ invoice, allowed }: { invoice: Invoice; allowed: boolean }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const [amount, setAmount] = useState('')
  const [amountError, setAmountError] = useState<string | undefined>()
  const [reason, setReason] = useState('')
  const issue = useMutation({
    mutationFn: (): Promise<CreditNote> => unwrap(api.POST('/api/v1/credit-notes/', {
      params: { header: { 'Idempotency-Key': submit.idempotencyKey.current } },
      body: { invoice: invoice.id, amount: amount.trim(), reason },
    })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['staff', 'invoice', invoice.id] })
      void qc.invalidateQueries({ queryKey: ['staff', 'credit-notes', invoice.id] })
      setOpened(false); setAmount(''); setReason('')
    },
  })
  const submit = useSubmitOnce(issue)
  const send = () => {
    const problem = amountProblem(amount, invoice.currency)
    setAmountError(problem)
    if (!problem) submit(undefined)
  }
  return (
    <>
      <WriteButton variant="default" allowed={allowed} deniedHint={READ_ONLY_STAFF} onClick={() => setOpened(true)}>
        Issue credit note
      </WriteButton>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Credit note against ${invoice.display_number}`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); send() }} noValidate>
          <Stack>
            <TextInput label={`Amount before tax (${invoice.currency})`} required inputMode="decimal"
              description={`At most ${money(String(creditable(invoice)), invoice.currency)}; tax at the invoice’s rate is added.`}
              value={amount} onChange={(e) => { setAmount(e.currentTarget.value); setAmountError(undefined) }}
              error={amountError ?? fieldError(issue.error, 'amount')} data-autofocus />
            <Textarea label="Reason" required minRows={2} maxLength={500} value={reason}
              description="Printed on the credit note." onChange={(e) => setReason(e.currentTarget.value)}
              error={fieldError(issue.error, 'reason')} />
            <ProblemAlert error={issue.error} shownFields={['amount', 'reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" loading={issue.isPending} disabled={!reason.trim() || !amount.trim()}>Issue</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** Record a payment (`POST /invoices/{id}/pay/`, audited): the amount received, the balance due unless changed, and
 * the payment's reference; one Idempotency-Key per submission, so a double click records it once. */
function PayButton({ invoice, allowed }: { invoice: Invoice; allowed: boolean }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const [amount, setAmount] = useState(invoice.balance_due)
  const [amountError, setAmountError] = useState<string | undefined>()
  const [reference, setReference] = useState('')
  const pay = useMutation({
    mutationFn: (): Promise<Invoice> => unwrap(api.POST('/api/v1/invoices/{id}/pay/', {
      params: { path: { id: invoice.id }, header: { 'Idempotency-Key': submit.idempotencyKey.current } },
      body: { amount: amount.trim(), reference },
    })),
    onSuccess: (updated) => {
      qc.setQueryData(['staff', 'invoice', invoice.id], updated)
      void qc.invalidateQueries({ queryKey: ['staff', 'invoices'] })
      setOpened(false); setReference('')
    },
  })
  const submit = useSubmitOnce(pay)
  const send = () => {
    const problem = amountProblem(amount, invoice.currency)
    setAmountError(problem)
    if (!problem) submit(undefined)
  }
  return (
    <>
      <WriteButton variant="default" allowed={allowed} deniedHint={READ_ONLY_STAFF} onClick={() => setOpened(true)}>
        Record payment
      </WriteButton>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Record a payment of ${invoice.display_number}`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); send() }} noValidate>
          <Stack>
            <TextInput label={`Amount received (${invoice.currency})`} required inputMode="decimal"
              description={`Balance due ${money(invoice.balance_due, invoice.currency)}.`}
              value={amount} onChange={(e) => { setAmount(e.currentTarget.value); setAmountError(undefined) }}
              error={amountError ?? fieldError(pay.error, 'amount')} data-autofocus />
            <TextInput label="Reference" required maxLength={200} value={reference}
              description="The payment's reference (bank transfer, receipt), kept in the audit log."
              onChange={(e) => setReference(e.currentTarget.value)} error={fieldError(pay.error, 'reference')} />
            <ProblemAlert error={pay.error} shownFields={['amount', 'reference']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" loading={pay.isPending} disabled={!reference.trim() || !amount.trim()}>Record payment</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** Void an invoice (`POST /invoices/{id}/void/`, audited with the reason). */
function VoidButton({ invoice, allowed }: { invoice: Invoice; allowed: boolean }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const [reason, setReason] = useState('')
  const voidIt = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/invoices/{id}/void/', { params: { path: { id: invoice.id } }, body: { reason } })),
    onSuccess: (updated) => {
      qc.setQueryData(['staff', 'invoice', invoice.id], updated)
      void qc.invalidateQueries({ queryKey: ['staff', 'invoices'] })
      setOpened(false); setReason('')
    },
  })
  const submit = useSubmitOnce(voidIt)
  return (
    <>
      <WriteButton variant="default" color="red" allowed={allowed} deniedHint={READ_ONLY_STAFF} onClick={() => setOpened(true)}>
        Void
      </WriteButton>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Void ${invoice.display_number || `the ${invoice.period} draft`}?`}
        centered closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); submit(undefined) }}>
          <Stack>
            <Text size="sm">A void invoice is owed no more; this cannot be undone.</Text>
            <Textarea label="Reason" required minRows={2} maxLength={500} value={reason} data-autofocus
              description="Kept in the audit log." onChange={(e) => setReason(e.currentTarget.value)}
              error={fieldError(voidIt.error, 'reason')} />
            <ProblemAlert error={voidIt.error} shownFields={['reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" color="red" loading={voidIt.isPending} disabled={!reason.trim()}>Void invoice</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** `/staff/billing/invoices/:id`: one invoice as billing staff see it: totals, lines (each explained), finalize
 * for a draft, the PDF, and credit notes against a finalized one. */
export function AdminInvoicePage() {
  const { id = '' } = useParams()
  const role = useBillingRole()
  const qc = useQueryClient()
  const orgName = useOrgNames()
  const [line, setLine] = useState<InvoiceLine | null>(null)
  const invoice = useQuery({
    queryKey: ['staff', 'invoice', id],
    queryFn: () => unwrap(api.GET('/api/v1/invoices/{id}/', { params: { path: { id } } })),
    enabled: role.staff,
  })
  const notes = useQuery({
    queryKey: ['staff', 'credit-notes', id],
    queryFn: () => unwrap(api.GET('/api/v1/credit-notes/', { params: { query: { invoice: id, page_size: 100 } } })),
    enabled: role.staff,
  })
  const finalize = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/invoices/{id}/finalize/', { params: { path: { id } } })),
    onSuccess: (updated) => { qc.setQueryData(['staff', 'invoice', id], updated); void qc.invalidateQueries({ queryKey: ['staff', 'invoices'] }) },
  })
  if (role.pending) return null
  if (!role.staff || (invoice.error instanceof ApiError && invoice.error.status === 404)) return <NotFoundPage what="invoice" />
  if (!invoice.data) return <ProblemAlert error={invoice.error} />
  const inv = invoice.data
  // a billing admin is offered what the server says it allows now (`allowed_actions`); other staff see the same
  // buttons the invoice's status has, disabled, with why
  const allowed = (action: string) => (role.writer ? (inv.allowed_actions ?? []).includes(action) : undefined)
  const offerFinalize = allowed('finalize') ?? inv.status === 'draft'
  const offerCredit = allowed('credit_note') ?? (inv.status === 'finalized' || inv.status === 'paid')
  const offerPay = allowed('pay') ?? inv.status === 'finalized'
  const offerVoid = allowed('void') ?? inv.status === 'finalized'
  return (
    <Stack>
      <Anchor component={Link} to="/staff/billing/invoices" size="sm">← Invoices</Anchor>
      <Group justify="space-between">
        <Group>
          <Title order={2}>{inv.display_number ? `Invoice ${inv.display_number}` : `Draft invoice ${inv.period}`}</Title>
          <InvoiceStatus status={inv.status} />
        </Group>
        <Group gap="xs">
          {offerFinalize && (
            <ConfirmButton label="Finalize" title={`Finalize the ${inv.period} invoice of ${orgName(inv.organization)}?`}
              message="It is re-rated from every usage record of its period, numbered and frozen: its lines never change again."
              confirmLabel="Finalize" onConfirm={() => finalize.mutate()} loading={finalize.isPending}
              allowed={role.writer} deniedHint={READ_ONLY_STAFF} />
          )}
          {offerCredit && <CreditNoteButton invoice={inv} allowed={role.writer} />}
          {offerPay && <PayButton invoice={inv} allowed={role.writer} />}
          {offerVoid && <VoidButton invoice={inv} allowed={role.writer} />}
          <Button component="a" variant="default" href={`/api/v1/invoices/${inv.id}/pdf/`} download>Download PDF</Button>
        </Group>
      </Group>
      <ProblemAlert error={finalize.error} title="The invoice was not finalized" />
      <SimpleGrid cols={{ base: 1, sm: 2 }}>
        <Paper withBorder p="md">
          <dl className="facts">
            <dt>Organization</dt><dd>{orgName(inv.organization)}</dd>
            <dt>Period</dt><dd>{inv.period} ({inv.timezone})</dd>
            <dt>Issued</dt><dd>{utcText(inv.finalized_at)}</dd>
            <dt>Unpriced usage</dt><dd>{Number(inv.unpriced_seconds) > 0 ? duration(inv.unpriced_seconds) : 'none'}</dd>
            <dt>Credited</dt><dd data-testid="credited">{money(inv.credited, inv.currency)}</dd>
            <dt>Balance due</dt><dd>{money(inv.balance_due, inv.currency)}</dd>
          </dl>
        </Paper>
        <Paper withBorder p="md"><Totals invoice={inv} currency={inv.currency} /></Paper>
      </SimpleGrid>
      <Title order={3} size="h4">Lines</Title>
      <Table striped withTableBorder aria-label="Invoice lines">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Description</Table.Th><Table.Th>SKU</Table.Th><Table.Th ta="right">Unit price</Table.Th>
            <Table.Th ta="right">Amount</Table.Th><Table.Th><span className="visually-hidden">Explain</span></Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {inv.lines.map((l) => (
            <Table.Tr key={l.id} data-testid="invoice-line" data-kind={l.kind}>
              <Table.Td>{l.description || l.kind}{l.kind !== 'usage' && <Text size="xs" c="dimmed">{l.kind === 'sla_credit' ? 'SLA credit' : l.kind}</Text>}</Table.Td>
              <Table.Td>{l.sku ? <Code>{l.sku}</Code> : '—'}</Table.Td>
              <Table.Td ta="right">{l.unit_price ? `${money(l.unit_price, inv.currency)}${l.unit ? ` / ${l.unit}` : ''}` : '—'}</Table.Td>
              <Table.Td ta="right">{money(l.amount, inv.currency)}</Table.Td>
              <Table.Td ta="right">
                <Button variant="default" size="xs" onClick={() => setLine(l)}
                  aria-label={`Explain ${l.description || l.sku || l.kind}`}>Explain</Button>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      {inv.lines.length === 0 && <Text size="sm" c="dimmed">No lines.</Text>}
      {line && <Explain key={line.id} invoice={inv} line={line} onClose={() => setLine(null)} />}
      <Title order={3} size="h4">Credit notes</Title>
      <ProblemAlert error={notes.error} />
      {notes.data && notes.data.results.length === 0 && <Text size="sm" c="dimmed">None issued against this invoice.</Text>}
      {notes.data && notes.data.results.length > 0 && <CreditNoteTable notes={notes.data.results} />}
    </Stack>
  )
}
