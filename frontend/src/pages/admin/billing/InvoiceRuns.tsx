import { Anchor, Badge, Checkbox, Group, Paper, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useParams } from 'react-router'
import { ApiError, api, unwrap } from '../../../api/client'
import { ProblemAlert, fieldError } from '../../../components/ProblemAlert'
import { WriteButton } from '../../../components/WriteButton'
import { useSubmitOnce } from '../../../hooks/useSubmitOnce'
import { NotFoundPage } from '../../NotFound'
import { InvoiceTable } from './Invoices'
import { BillingTabs, READ_ONLY_STAFF, useBillingRole } from './common'
import { lastMonth, runFinished, runProgress, utcText, type InvoiceRun } from './logic'

const RUN_COLORS: Record<string, string> = { pending: 'gray.7', running: 'blue.8', completed: 'teal.9', failed: 'red.9' }

export function RunStatus({ run }: { run: InvoiceRun }) {
  return <Badge color={RUN_COLORS[run.status ?? ''] ?? 'gray.7'} variant="filled" data-testid="run-status">{run.status}</Badge>
}

/** `/staff/billing/invoice-runs`: the runs (newest first) and, for billing admins, a form that starts one (last
 * month by default; `POST /invoice-runs/`, 202 and a worker runs it). */
export function AdminInvoiceRunsPage() {
  const role = useBillingRole()
  const qc = useQueryClient()
  const runs = useQuery({
    queryKey: ['staff', 'invoice-runs'],
    queryFn: () => unwrap(api.GET('/api/v1/invoice-runs/', { params: { query: { page_size: 50 } } })),
    enabled: role.staff,
    refetchInterval: (q) => (q.state.data?.results.some((r) => !runFinished(r)) ? 2_000 : false),
  })
  const [period, setPeriod] = useState(lastMonth())
  const [finalize, setFinalize] = useState(true)
  const start = useMutation({
    mutationFn: (): Promise<InvoiceRun> => unwrap(api.POST('/api/v1/invoice-runs/', {
      params: { header: { 'Idempotency-Key': submit.idempotencyKey.current } }, body: { period, finalize },
    })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['staff', 'invoice-runs'] }),
  })
  // a double click on Start run starts one run (the second POST would answer 409 "in progress" over it)
  const submit = useSubmitOnce(start)
  if (role.pending) return null
  if (!role.staff || (runs.error instanceof ApiError && runs.error.status === 404)) return <NotFoundPage />
  const rows = [...(runs.data?.results ?? [])].sort((a, b) => b.created_at.localeCompare(a.created_at))
  return (
    <Stack>
      <Title order={2}>Billing: invoice runs</Title>
      <BillingTabs />
      <Paper withBorder p="md" component="section" aria-labelledby="start-run">
        <form onSubmit={(e) => { e.preventDefault(); submit(undefined) }}>
          <Stack gap="sm">
            <Title order={3} size="h4" id="start-run">Start a run</Title>
            <Text size="sm" c="dimmed">
              Invoices every organization with usage, adjustments or pending SLA credits for the month; safe to repeat
              (finalized invoices are never touched again, drafts are recomputed).
            </Text>
            <Group align="end">
              <TextInput label="Period" w={320} description="YYYY-MM: that month of each organization in its billing time zone (UTC unless set)" value={period} required
                onChange={(e) => setPeriod(e.currentTarget.value)} error={fieldError(start.error, 'period')} />
              <Checkbox label="Finalize the invoices of months that have ended" checked={finalize}
                onChange={(e) => setFinalize(e.currentTarget.checked)} mb={8} />
              <WriteButton type="submit" allowed={role.writer} deniedHint={READ_ONLY_STAFF} loading={start.isPending}>
                Start run
              </WriteButton>
            </Group>
            <ProblemAlert error={start.error} shownFields={['period']} />
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={runs.error} />
      <Table striped withTableBorder aria-label="Invoice runs">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Period</Table.Th><Table.Th>Status</Table.Th><Table.Th>Progress</Table.Th>
            <Table.Th>Started</Table.Th><Table.Th>Finished</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((r) => (
            <Table.Tr key={r.id} data-testid="invoice-run" data-period={r.period}>
              <Table.Td>
                <Anchor component={Link} c="indigo.9" to={`/staff/billing/invoice-runs/${r.id}`}>{r.period}{r.finalize ? '' : ' (drafts)'}</Anchor>
              </Table.Td>
              <Table.Td><RunStatus run={r} /></Table.Td>
              <Table.Td>{runProgress(r)}</Table.Td>
              <Table.Td>{utcText(r.created_at)}</Table.Td>
              <Table.Td>{utcText(r.finished_at)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      {runs.isSuccess && rows.length === 0 && <Text c="dimmed">No invoice run yet.</Text>}
    </Stack>
  )
}

/** `/staff/billing/invoice-runs/:id`: one run's progress (polled until it finishes), its held drafts and error,
 * and the invoices of its period. */
export function AdminInvoiceRunPage() {
  const { id = '' } = useParams()
  const role = useBillingRole()
  const run = useQuery({
    queryKey: ['staff', 'invoice-run', id],
    queryFn: () => unwrap(api.GET('/api/v1/invoice-runs/{id}/', { params: { path: { id } } })),
    enabled: role.staff,
    refetchInterval: (q) => (runFinished(q.state.data) ? false : 1_500),
  })
  const r = run.data
  const invoices = useQuery({
    queryKey: ['staff', 'invoices', r?.period, r?.status],
    queryFn: () => unwrap(api.GET('/api/v1/invoices/', { params: { query: { period: r?.period, page_size: 100 } } })),
    enabled: Boolean(r),
  })
  if (role.pending) return null
  if (!role.staff || (run.error instanceof ApiError && run.error.status === 404)) return <NotFoundPage />
  if (!r) return <ProblemAlert error={run.error} />
  const held = (r.held_invoices as unknown[] | undefined) ?? []
  return (
    <Stack>
      <Anchor component={Link} to="/staff/billing/invoice-runs" size="sm">← Invoice runs</Anchor>
      <Group>
        <Title order={2}>Invoice run {r.period}</Title>
        <RunStatus run={r} />
      </Group>
      <Paper withBorder p="md">
        <dl className="facts">
          <dt>Progress</dt><dd data-testid="run-progress">{runProgress(r)}</dd>
          <dt>Finalize</dt><dd>{r.finalize ? 'yes, each organization once its month has ended' : 'no (drafts only)'}</dd>
          <dt>Started</dt><dd>{utcText(r.created_at)}</dd>
          <dt>Finished</dt><dd>{utcText(r.finished_at)}</dd>
          <dt>Operation</dt><dd>{r.operation ?? '—'}</dd>
          <dt>Held drafts</dt><dd>{held.length ? `${held.length} (usage without a price)` : 'none'}</dd>
        </dl>
        {r.error && <Text c="red.9" size="sm" mt="sm">{r.error}</Text>}
      </Paper>
      <Title order={3} size="h4">Invoices of {r.period}</Title>
      <ProblemAlert error={invoices.error} />
      {invoices.data && <InvoiceTable invoices={invoices.data.results} />}
    </Stack>
  )
}
