import { Anchor, Button, Checkbox, Group, Modal, NativeSelect, Stack, Table, Text, TextInput, Textarea, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link } from 'react-router'
import { api, unwrap, type FleetSummary, type Schemas } from '../../api/client'
import { useMe } from '../../auth/staff'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { useSubmitOnce } from '../../hooks/useSubmitOnce'
import { money } from '../../hooks/billing'
import { pct } from '../Billing'
import { NotFoundPage } from '../NotFound'
import { fleetKey, fleetQuery } from './queries'
import { shortId } from '../../shortId'

type Incident = Schemas['IncidentOutput']
type SlaReport = Schemas['SlaReportOutput']
type Impact = Schemas['IncidentImpactOutput']

/** "2 h 05 min", "45 s" — an incident's downtime; "open" while it lasts. */
export function durationText(s: number | null | undefined): string {
  if (s === null || s === undefined) return 'open'
  if (s < 60) return `${s} s`
  const m = Math.round(s / 60)
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`
}

/** Host name -> id, from the fleet summary (incidents name their host). */
export function hostIds(summary: FleetSummary | undefined): Map<string, string> {
  const out = new Map<string, string>()
  for (const r of summary?.regions ?? []) for (const z of r.zones) for (const k of z.racks) for (const h of k.hosts) out.set(h.name, h.id)
  return out
}

const when = (iso: string | null | undefined) => (iso ? iso.replace('T', ' ').slice(0, 16) + ' UTC' : '—')

type Path = '/api/v1/hosts/{id}/mark-faulty/' | '/api/v1/hosts/{id}/mark-available/'

function useHostAction(path: Path, onDone: () => void) {
  const qc = useQueryClient()
  return useMutation({
    mutationFn: (v: { id: string; reason: string; provider_at_fault: boolean }) =>
      unwrap(api.POST(path, { params: { path: { id: v.id } }, body: { reason: v.reason, provider_at_fault: v.provider_at_fault } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['incidents'] })
      void qc.invalidateQueries({ queryKey: fleetKey })
      onDone()
    },
  })
}

/** Open an incident for a host: mark it faulty with a reason (POST /hosts/{id}/mark-faulty/, audited); when the
 * provider is at fault its downtime counts against its tenants' SLA. */
function OpenIncident({ hosts }: { hosts: Map<string, string> }) {
  const [opened, setOpened] = useState(false)
  const [host, setHost] = useState<string | null>(null)
  const [reason, setReason] = useState('')
  const [fault, setFault] = useState(true)
  const open = useHostAction('/api/v1/hosts/{id}/mark-faulty/', () => { setOpened(false); setReason('') })
  const submitOpen = useSubmitOnce(open)
  return (
    <>
      <Button onClick={() => { open.reset(); setOpened(true) }}>Open incident</Button>
      <Modal opened={opened} onClose={() => setOpened(false)} title="Open an incident" centered closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); if (host) submitOpen({ id: hosts.get(host)!, reason, provider_at_fault: fault }) }}>
          <Stack>
            <Text size="sm">The host is marked faulty: nothing new is placed on it until it is marked available again, which closes the incident.</Text>
            <NativeSelect label="Host" required data={[{ value: '', label: 'Choose a host' }, ...[...hosts.keys()].sort()]}
              value={host ?? ''} onChange={(e) => setHost(e.currentTarget.value || null)} data-autofocus />
            <Textarea label="Reason" description="Recorded on the incident, the host and the audit log." required minRows={2}
              maxLength={500} value={reason} onChange={(e) => setReason(e.currentTarget.value)} error={fieldError(open.error, 'reason')} />
            <Checkbox label="The provider is at fault (counts as SLA downtime)" checked={fault} onChange={(e) => setFault(e.currentTarget.checked)} />
            <ProblemAlert error={open.error} shownFields={['reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" color="red.9" loading={open.isPending} disabled={!host || !reason.trim()}>Open incident</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** Close a host's open incident: mark the host available again (POST /hosts/{id}/mark-available/). */
function CloseIncident({ incident, hostId }: { incident: Incident; hostId: string }) {
  const [opened, setOpened] = useState(false)
  const [reason, setReason] = useState('')
  const close = useHostAction('/api/v1/hosts/{id}/mark-available/', () => setOpened(false))
  const submitClose = useSubmitOnce(close)
  return (
    <>
      <Button size="xs" color="teal.9" onClick={() => { close.reset(); setOpened(true) }} aria-label={`Close the incident of ${incident.host}`}>
        Close
      </Button>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Close the incident of ${incident.host}?`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); submitClose({ id: hostId, reason, provider_at_fault: true }) }}>
          <Stack>
            <Text size="sm">The host is marked available (back in service); the incident ends now.</Text>
            <Textarea label="Reason" required minRows={2} maxLength={500} value={reason} data-autofocus
              onChange={(e) => setReason(e.currentTarget.value)} error={fieldError(close.error, 'reason')} />
            <ProblemAlert error={close.error} shownFields={['reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" color="teal.9" loading={close.isPending} disabled={!reason.trim()}>Close incident</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** A datetime-local value (UTC) from an ISO time, and back. */
export function toLocal(iso: string | null | undefined): string {
  const t = iso ? new Date(iso) : null
  return t && !Number.isNaN(t.getTime()) ? t.toISOString().slice(0, 16) : ''
}
const fromLocal = (local: string) => new Date(`${local}Z`).toISOString()

/** The PATCH body for the changed fields only (times as ISO 8601 UTC); `end` only for a closed incident. */
export function incidentChanges(i: Incident, f: { start: string; end: string; reason: string; fault: boolean }) {
  return {
    ...(f.start && f.start !== toLocal(i.start) ? { start: fromLocal(f.start) } : {}),
    ...(i.end && f.end && f.end !== toLocal(i.end) ? { end: fromLocal(f.end) } : {}),
    ...(f.reason.trim() !== i.reason ? { reason: f.reason.trim() } : {}),
    ...(f.fault !== i.provider_at_fault ? { provider_at_fault: f.fault } : {}),
  }
}

/** An incident's impact (GET /incidents/{id}/impact/): the resources that ran on its host or GPU while it lasted,
 * each with its organization, downtime and its share of SLA credits; and, for operators, a form to correct its
 * times, reason and provider fault (PATCH /incidents/{id}/, audited; the server's refusal on the field). */
function IncidentDetails({ incident, operator }: { incident: Incident; operator: boolean }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const blank = { start: toLocal(incident.start), end: toLocal(incident.end), reason: incident.reason, fault: incident.provider_at_fault ?? true }
  const [form, setForm] = useState(blank)
  const impact = useQuery({
    queryKey: ['incident-impact', incident.id, incident.end, incident.start, incident.provider_at_fault], enabled: opened,
    queryFn: () => unwrap(api.GET('/api/v1/incidents/{id}/impact/', { params: { path: { id: incident.id } } })),
  })
  const save = useMutation({
    mutationFn: () => unwrap(api.PATCH('/api/v1/incidents/{id}/', { params: { path: { id: incident.id } }, body: incidentChanges(incident, form) })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['incidents'] })
      void qc.invalidateQueries({ queryKey: ['incident-impact', incident.id] })
    },
  })
  const submitSave = useSubmitOnce(save)
  const changed = Object.keys(incidentChanges(incident, form)).length > 0
  const data: Impact | undefined = impact.data
  return (
    <>
      <Button size="xs" variant="default" onClick={() => { setForm(blank); save.reset(); setOpened(true) }}
        aria-label={`Details of the incident of ${incident.host} from ${when(incident.start)}`}>
        Details
      </Button>
      <Modal opened={opened} onClose={() => setOpened(false)} size="xl" centered closeButtonProps={{ 'aria-label': 'Close' }}
        title={`Incident of ${incident.host}${incident.gpu_index !== null && incident.gpu_index !== undefined ? ` GPU ${incident.gpu_index}` : ''}`}>
        <Stack>
          <Title order={3} size="h5">Downtime and credits it caused</Title>
          <ProblemAlert error={impact.error} />
          {data && (
            <>
              <Text size="sm" data-testid="incident-impact-summary">
                {data.resources.length} resource{data.resources.length === 1 ? '' : 's'} down for {durationText(data.downtime_s)} in all
                {data.open ? ' so far' : ''};{' '}
                {data.counts_for_sla
                  ? (data.credits.length ? `SLA credits ${data.credits.map((c) => money(c.amount, c.currency)).join(', ')}` : 'no SLA credit yet (the month\'s invoice run makes them)')
                  : 'not the provider\'s fault: no SLA credit'}.
              </Text>
              <Table withTableBorder data-testid="incident-resources">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Resource</Table.Th><Table.Th>Organization</Table.Th><Table.Th ta="right">Downtime</Table.Th><Table.Th>SLA credits</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {data.resources.map((r) => (
                    <Table.Tr key={`${r.resource_type}:${r.resource_id}`} data-testid="incident-resource">
                      <Table.Td>{r.resource_type} {shortId(r.resource_id)}{r.partial ? ' (part)' : ''}</Table.Td>
                      <Table.Td>{r.organization_name || '—'}</Table.Td>
                      <Table.Td ta="right">{durationText(r.downtime_s)}</Table.Td>
                      <Table.Td>{r.credits.length ? r.credits.map((c) => `${c.period}: ${money(c.credit_amount, c.currency)}`).join('; ') : '—'}</Table.Td>
                    </Table.Tr>
                  ))}
                  {!data.resources.length && (
                    <Table.Tr><Table.Td colSpan={4}><Text size="sm" c="dimmed">Nothing ran there while it lasted.</Text></Table.Td></Table.Tr>
                  )}
                </Table.Tbody>
              </Table>
            </>
          )}
          {operator && (
            <form onSubmit={(e) => { e.preventDefault(); submitSave(undefined) }}>
              <Stack gap="sm">
                <Title order={3} size="h5">Correct the incident</Title>
                <Group grow align="start">
                  <TextInput label="Start (UTC)" type="datetime-local" value={form.start} required
                    onChange={(e) => setForm({ ...form, start: e.currentTarget.value })} error={fieldError(save.error, 'start')} />
                  <TextInput label="End (UTC)" type="datetime-local" value={form.end} disabled={!incident.end}
                    description={incident.end ? undefined : 'Open: it ends when the host is marked available'}
                    onChange={(e) => setForm({ ...form, end: e.currentTarget.value })} error={fieldError(save.error, 'end')} />
                </Group>
                <Textarea label="Reason" minRows={2} maxLength={500} value={form.reason}
                  onChange={(e) => setForm({ ...form, reason: e.currentTarget.value })} error={fieldError(save.error, 'reason')} />
                <Checkbox label="The provider is at fault (counts as SLA downtime)" checked={form.fault}
                  onChange={(e) => setForm({ ...form, fault: e.currentTarget.checked })} />
                <ProblemAlert error={save.error} shownFields={['start', 'end', 'reason']} />
                {save.isSuccess && !changed && <Text size="sm" c="teal.9" role="status">Saved.</Text>}
                <Group justify="flex-end">
                  <Button type="submit" loading={save.isPending} disabled={!changed}>Save changes</Button>
                </Group>
              </Stack>
            </form>
          )}
        </Stack>
      </Modal>
    </>
  )
}

/** `/staff/incidents`: hosts' and GPUs' faulty periods (GET /incidents/), opening one for a host and closing it, and
 * the SLA credits that provider-at-fault downtime produced (GET /sla-reports/, made by each month's invoice run). */
export function AdminIncidentsPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  const [openOnly, setOpenOnly] = useState(false)
  const summary = useQuery({ ...fleetQuery, enabled: staff })
  const incidents = useQuery({
    queryKey: ['incidents', openOnly], enabled: staff,
    queryFn: () => unwrap(api.GET('/api/v1/incidents/', { params: { query: { page_size: 100, ...(openOnly ? { open: true } : {}) } } })),
  })
  const sla = useQuery({
    queryKey: ['sla-reports'], enabled: staff,
    queryFn: () => unwrap(api.GET('/api/v1/sla-reports/', { params: { query: { page_size: 100 } } })),
  })
  if (me.isPending) return null
  if (!staff) return <NotFoundPage />
  const ids = hostIds(summary.data)
  const rows = [...(incidents.data?.results ?? [])].sort((a, b) => b.start.localeCompare(a.start))
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Incidents</Title>
        {me.data?.staff_role === 'operator' && <OpenIncident hosts={ids} />}
      </Group>
      {(incidents.error || sla.error) && <ProblemAlert error={incidents.error ?? sla.error} />}
      <Checkbox label="Open incidents only" checked={openOnly} onChange={(e) => setOpenOnly(e.currentTarget.checked)} />
      <Table striped withTableBorder data-testid="incident-list">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Host</Table.Th><Table.Th>GPU</Table.Th><Table.Th>Start</Table.Th><Table.Th>End</Table.Th>
            <Table.Th>Downtime</Table.Th><Table.Th>Reason</Table.Th><Table.Th>Provider at fault</Table.Th>
            <Table.Th><span className="visually-hidden">Actions</span></Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((i) => (
            <Table.Tr key={i.id} data-testid="incident-row" data-host={i.host} data-open={i.end ? 'false' : 'true'}>
              <Table.Td>{i.host}</Table.Td>
              <Table.Td>{i.gpu_index ?? 'whole host'}</Table.Td>
              <Table.Td>{when(i.start)}</Table.Td>
              <Table.Td>{when(i.end)}</Table.Td>
              <Table.Td data-testid="incident-duration">{durationText(i.duration_s)}</Table.Td>
              <Table.Td>{i.reason}</Table.Td>
              <Table.Td>{i.provider_at_fault ? 'yes' : 'no'}</Table.Td>
              <Table.Td>
                <Group gap={6} wrap="nowrap">
                  <IncidentDetails incident={i} operator={me.data?.staff_role === 'operator'} />
                  {!i.end && i.gpu === null && ids.has(i.host) && me.data?.staff_role === 'operator' && (
                    <CloseIncident incident={i} hostId={ids.get(i.host)!} />
                  )}
                </Group>
              </Table.Td>
            </Table.Tr>
          ))}
          {incidents.data && !rows.length && (
            <Table.Tr><Table.Td colSpan={8}><Text size="sm" c="dimmed">No incident.</Text></Table.Td></Table.Tr>
          )}
        </Table.Tbody>
      </Table>
      <Title order={3} size="h4">SLA credits</Title>
      <Text size="sm" c="dimmed">
        Per resource and month with provider-caused downtime: made by the month's invoice run, credited on the next invoice.
      </Text>
      <Table striped withTableBorder data-testid="sla-reports">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Period</Table.Th><Table.Th>Resource</Table.Th><Table.Th>SLA tier</Table.Th>
            <Table.Th ta="right">Downtime (min)</Table.Th><Table.Th ta="right">Uptime</Table.Th>
            <Table.Th ta="right">Credit</Table.Th><Table.Th ta="right">Amount</Table.Th><Table.Th>Credited on</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {(sla.data?.results ?? []).map((r: SlaReport) => (
            <Table.Tr key={r.id} data-testid="sla-row">
              <Table.Td>{String(r.period)}</Table.Td>
              <Table.Td>{r.resource_type} {shortId(r.resource_id)}</Table.Td>
              <Table.Td>{r.sla_tier}</Table.Td>
              <Table.Td ta="right">{Number(r.downtime_minutes).toLocaleString('en-US', { maximumFractionDigits: 1 })} min</Table.Td>
              <Table.Td ta="right">{pct(r.uptime_pct)} (target {pct(r.target_uptime_pct)})</Table.Td>
              <Table.Td ta="right">{pct(r.credit_pct)}</Table.Td>
              <Table.Td ta="right">{money(r.credit_amount, r.currency)}</Table.Td>
              <Table.Td>
                {r.applied_invoice
                  ? <Anchor component={Link} to={`/staff/billing/invoices/${r.applied_invoice}`} size="sm">{r.applied_invoice_number || 'a draft invoice'}</Anchor>
                  : 'next invoice'}
              </Table.Td>
            </Table.Tr>
          ))}
          {sla.data && !sla.data.results.length && (
            <Table.Tr><Table.Td colSpan={8}><Text size="sm" c="dimmed">No SLA credit yet (invoice runs make them for closed months).</Text></Table.Td></Table.Tr>
          )}
        </Table.Tbody>
      </Table>
    </Stack>
  )
}
