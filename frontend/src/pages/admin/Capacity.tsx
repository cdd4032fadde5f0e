import { Button, Group, Stack, Table, Text, Title } from '@mantine/core'
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { ApiError } from '../../api/client'
import { useMe } from '../../auth/staff'
import { ProblemAlert } from '../../components/ProblemAlert'
import { NotFoundPage } from '../NotFound'
import { capacityCsv, capacityRows, totalRow, waitText, type CapacityRow, type QueueFigures } from './capacity'
import { CAPACITY_WEEKS as WEEKS, calendarQuery, currentCapacityWindows, figuresQuery } from './queries'

const n = (v: number) => v.toLocaleString('en-US')
const day = (iso: string) => new Date(iso).toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' })

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }))
  const a = document.createElement('a')
  a.href = url
  a.download = name
  a.click()
  URL.revokeObjectURL(url)
}

function Figures({ r, head }: { r: CapacityRow; head?: boolean }) {
  const Cell = head ? Table.Th : Table.Td
  return (
    <Table.Tr data-testid={head ? 'capacity-total' : 'capacity-row'} data-model={r.gpuModel} data-zone={r.zone}>
      {/* the model breaks at its hyphens, so the table fits 1,280 px */}
      <Cell miw={90}>{r.gpuModel}</Cell>
      <Cell style={{ whiteSpace: 'nowrap' }}>{r.zone}</Cell>
      <Cell ta="right">{n(r.total)}</Cell>
      <Cell ta="right">{n(r.allocated)}</Cell>
      <Cell ta="right">{n(r.leased)}</Cell>
      <Cell ta="right">{n(r.onDemand)}</Cell>
      <Cell ta="right">{n(r.spot)}</Cell>
      <Cell ta="right">{n(r.reserved)}</Cell>
      <Cell ta="right" data-testid="capacity-free">{n(r.free)}</Cell>
      <Cell ta="right" data-testid="capacity-fragmented">{r.fragmented.toLocaleString('en-US')}</Cell>
      <Cell ta="right" data-testid="capacity-block">{n(r.largestBlock)}</Cell>
      <Cell ta="right" data-testid="capacity-out">{n(r.outOfService)}</Cell>
      <Cell ta="right">{n(r.faulty)}</Cell>
      <Cell ta="right">{n(r.scrubbing)}</Cell>
      <Cell ta="right">{n(r.mig)} / {n(r.vgpu)}</Cell>
    </Table.Tr>
  )
}

/** The on-demand queue now and over the last 24 h (`GET /capacity/fleet-figures/`). */
function QueuePanel({ queue }: { queue: QueueFigures | undefined }) {
  if (!queue) return null
  return (
    <Group gap="xl" data-testid="capacity-queue" role="group" aria-label="On-demand queue">
      <Text size="sm"><b>On-demand queue:</b> {n(queue.waiting)} waiting ({n(queue.waiting_gpus)} GPUs)</Text>
      <Text size="sm">Longest wait now: {waitText(queue.longest_wait_s)}; median {waitText(queue.median_wait_s)}</Text>
      <Text size="sm">Last 24 h: {n(queue.placed)} placed after a median {waitText(queue.placed_wait_p50_s)} (longest {waitText(queue.placed_wait_max_s)}), {n(queue.expired)} expired</Text>
    </Group>
  )
}

/** `/staff/capacity`: GPUs by model and zone now (from the fleet figures and the capacity calendar's staff view)
 * and the free GPUs of the coming weeks; a CSV export of the same figures. */
export function AdminCapacityPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  const [win] = useState(() => currentCapacityWindows())
  // all three started by the route's loader, beside the session check (queries.ts)
  const figures = useQuery(figuresQuery)
  const now = useQuery(calendarQuery('now', win.now))
  const ahead = useQuery(calendarQuery('ahead', win.ahead))
  if (me.isPending) return null
  if (!staff || (figures.error instanceof ApiError && figures.error.status === 404)) return <NotFoundPage />
  const ready = Boolean(figures.data && now.data && ahead.data)
  const rows = ready ? capacityRows(figures.data!, now.data!, ahead.data!, win.weekStarts) : []
  const total = totalRow(rows, WEEKS)
  const error = figures.error ?? now.error ?? ahead.error
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Capacity</Title>
        <Button variant="default" disabled={!ready}
          onClick={() => download(`capacity-${win.now.start.slice(0, 16).replace(':', '')}.csv`, capacityCsv(rows, win.weekStarts, figures.data?.queue))}>
          Export CSV
        </Button>
      </Group>
      <Text size="sm" c="dimmed">
        GPUs by model and zone now. Free: what a new request could get now (on available hosts, held by nothing, the
        on-demand reserve kept back). Leased, on-demand and spot count available hosts; out of service counts the GPUs of
        hosts that are cordoned, draining, in maintenance, faulty or enrolling. Stranded: of the free whole GPUs, those
        the typical requests (the whole-GPU requests running and waiting) cannot use, too few free together on a host;
        largest block: the most free GPUs on one host.
      </Text>
      {error && <ProblemAlert error={error} />}
      <QueuePanel queue={figures.data?.queue} />
      {/* a narrow screen scrolls the table sideways (at 1,280 px and wider it fits): the region takes the keyboard
          focus to scroll it */}
      <div style={{ overflowX: 'auto' }} tabIndex={0} role="region" aria-label="GPUs by model and zone, now">
        <Table striped withTableBorder fz="sm" horizontalSpacing={5} data-testid="capacity-table"
          data-ready={ready ? 'true' : 'false'} aria-busy={!ready}>
          <Table.Caption>GPUs by model and zone, now</Table.Caption>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>GPU model</Table.Th>
              <Table.Th>Zone</Table.Th>
              <Table.Th ta="right">Total</Table.Th>
              <Table.Th ta="right">Allocated</Table.Th>
              <Table.Th ta="right">Leased</Table.Th>
              <Table.Th ta="right">On-demand</Table.Th>
              <Table.Th ta="right">Spot</Table.Th>
              <Table.Th ta="right">Reserve</Table.Th>
              <Table.Th ta="right">Free now</Table.Th>
              <Table.Th ta="right">Stranded</Table.Th>
              <Table.Th ta="right">Largest block</Table.Th>
              <Table.Th ta="right">Out of service</Table.Th>
              <Table.Th ta="right">Faulty</Table.Th>
              <Table.Th ta="right">Scrubbing</Table.Th>
              <Table.Th ta="right">MIG / vGPU</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((r) => <Figures key={r.key} r={r} />)}
            {ready && !rows.length && (
              <Table.Tr><Table.Td colSpan={15}><Text c="dimmed">No GPUs in the fleet yet.</Text></Table.Td></Table.Tr>
            )}
          </Table.Tbody>
          {rows.length > 1 && <Table.Tfoot><Figures r={total} head /></Table.Tfoot>}
        </Table>
      </div>
      <Title order={3} size="h4">MIG profiles, vGPU types and shares</Title>
      <Text size="sm" c="dimmed">
        Per GPU model and zone, what the GPUs in MIG, vGPU or shared mode on available hosts could still hold now: GPU
        instances of each MIG profile (each profile counted alone), vGPUs of each type, milli-GPU of shares.
      </Text>
      <Table striped withTableBorder data-testid="capacity-slices">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>GPU model</Table.Th>
            <Table.Th>Zone</Table.Th>
            <Table.Th>Form</Table.Th>
            <Table.Th>Profile</Table.Th>
            <Table.Th ta="right">GPUs</Table.Th>
            <Table.Th ta="right">Free</Table.Th>
            <Table.Th ta="right">Of</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.flatMap((r) => r.slices.map((sl) => (
            <Table.Tr key={`${r.key}/${sl.form}/${sl.profile}`} data-testid="capacity-slice" data-profile={sl.profile}>
              <Table.Td>{r.gpuModel}</Table.Td>
              <Table.Td>{r.zone}</Table.Td>
              <Table.Td>{sl.form === 'mig' ? 'MIG' : sl.form === 'vgpu' ? 'vGPU' : 'shares'}</Table.Td>
              <Table.Td>{sl.profile || 'milli-GPU'}</Table.Td>
              <Table.Td ta="right">{n(sl.gpus)}</Table.Td>
              <Table.Td ta="right">{n(sl.free)}</Table.Td>
              <Table.Td ta="right">{n(sl.total)}</Table.Td>
            </Table.Tr>
          )))}
          {ready && !rows.some((r) => r.slices.length) && (
            <Table.Tr><Table.Td colSpan={7}><Text size="sm" c="dimmed">No GPU in MIG, vGPU or shared mode on an available host.</Text></Table.Td></Table.Tr>
          )}
        </Table.Tbody>
      </Table>
      <Title order={3} size="h4">Free GPUs in the coming weeks</Title>
      <Text size="sm" c="dimmed">
        GPUs that no lease or running on-demand work holds at any time of the week (available hosts, the reserve kept back).
      </Text>
      <Table striped withTableBorder data-testid="capacity-ahead">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>GPU model</Table.Th>
            <Table.Th>Zone</Table.Th>
            {win.weekStarts.map((w) => <Table.Th key={w} ta="right">Week of {day(w)}</Table.Th>)}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((r) => (
            <Table.Tr key={r.key}>
              <Table.Td>{r.gpuModel}</Table.Td>
              <Table.Td>{r.zone}</Table.Td>
              {r.ahead.map((v, i) => <Table.Td key={i} ta="right">{n(v)}</Table.Td>)}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Stack>
  )
}
