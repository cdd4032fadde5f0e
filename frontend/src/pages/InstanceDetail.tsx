import { Anchor, Button, Code, Group, Loader, Modal, Paper, ScrollArea, Select, SimpleGrid, Stack, Tabs, Text, Title, Tooltip } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useNavigate, useParams } from 'react-router'
import { ApiError, api, unwrap, type Flavor, type Instance, type Operation, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert } from '../components/ProblemAlert'
import { StatusBadge, TRANSITIONAL } from '../components/StatusBadge'
import { READ_ONLY_HINT } from '../components/WriteButton'
import { byId, gpuLabel, imageLabel, sizeLabel, useFlavors, useImages } from '../hooks/catalog'
import { useUrlTab } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { AuditTable } from './Audit'
import { NotFoundPage } from './NotFound'
import { shortId } from '../shortId'

/** What the instance's planned move off failed hardware (`maintenance`, docs/health.md) means for the tenant. */
export function maintenanceText(m: NonNullable<Instance['maintenance']>): string {
  const at = m.deadline_at ? new Date(m.deadline_at).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : ''
  switch (m.status) {
    case 'notice':
      return `A hardware fault affects this instance: it will be re-created on a healthy host at ${at}. Its root disk is `
        + 'created again from the image (attached volumes follow it): save your work before then.'
    case 'proposed':
      return 'A hardware fault affects this instance: moving it to a healthy host waits for your approval. Its root '
        + 'disk is created again from the image (attached volumes follow it).'
    case 'approved': case 'running':
      return 'A hardware fault affected this instance: it is being re-created on a healthy host.'
    default:
      return `A hardware fault affects this instance; it stays where it is${m.reason ? `: ${m.reason}` : ''}.`
  }
}

type SlaReport = Schemas['SlaReportOutput']
type InstanceAccepted = Schemas['InstanceAccepted']

/** The flavors a resize may choose (docs/compute.md, Resize): active VM flavors other than the current one with
 * the same GPU spec (form, model, count, MIG profile, vGPU type, share), since a resize keeps the GPUs. */
export function resizeChoices(current: Flavor | undefined, flavors: Flavor[]): Flavor[] {
  if (!current || current.kind !== 'vm') return []
  const spec = (f: Flavor) => [f.gpu_form, f.gpu_model, f.gpu_count, f.mig_profile, f.vgpu_type, f.share_milli].join('|')
  return flavors.filter((f) => f.id !== current.id && f.kind === 'vm' && spec(f) === spec(current))
}

/** Why Resize is disabled (null when it is not): the server's `can_write`, then the state rule of the API (only a
 * stopped instance is resized, 409 `invalid_state` otherwise), then whether any flavor fits. */
export function resizeBlocked(vm: Instance, canWrite: boolean, choices: Flavor[], busy: boolean): string | null {
  if (!canWrite) return READ_ONLY_HINT
  if (busy) return 'Wait for the current operation to finish.'
  if (vm.status !== 'stopped') return `Only a stopped instance can be resized (this one is ${vm.status}): stop it first.`
  if (choices.length === 0) return 'No other flavor has the same GPUs as this one.'
  return null
}

/** The billing month (YYYY-MM) of `now` in UTC, as GET /sla-reports/?period= takes it. */
export function currentPeriod(now: Date = new Date()): string {
  return now.toISOString().slice(0, 7)
}

/** "99.95 % (target 99.9 %)" from the month's SLA report row of the resource, or that none was recorded (a report
 * row exists only for a resource with provider-caused downtime). */
export function availabilityLabel(report: SlaReport | undefined): string {
  if (!report) return 'no downtime recorded'
  const pct = (v: string) => `${Number(Number(v).toFixed(3))} %`
  return `${pct(report.uptime_pct)} (target ${pct(report.target_uptime_pct)}, ${Number(report.downtime_minutes)} min down)`
}

/** How often the detail asks the server: every second while something is changing, else every two, so a change
 * made anywhere shows at most about two seconds late. */
/** An operation on an instance in words ("Stop", "Resize"); another kind as the API names it. */
const OPERATION_WORDS: Record<string, string> = {
  'instance.create': 'Launch', 'instance.start': 'Start', 'instance.stop': 'Stop', 'instance.reboot': 'Reboot',
  'instance.delete': 'Delete', 'instance.resize': 'Resize',
}
const OPERATION_STATUS: Record<string, string> = {
  pending: 'waiting to start', running: 'in progress', succeeded: 'done', failed: 'failed', cancelled: 'cancelled',
}
/** "Stop: done", "Resize: in progress (step define)": the instance's last operation, for its status line. */
export function operationText(op: Pick<Operation, 'kind' | 'status' | 'step' | 'error_detail'>): string {
  return `${OPERATION_WORDS[op.kind] ?? op.kind}: ${OPERATION_STATUS[op.status] ?? op.status}`
    + (op.step ? ` (step ${op.step})` : '') + (op.error_detail ? ` — ${op.error_detail}` : '')
}

/** The power state the host last reported (libvirt's domain state), in words. */
const POWER_WORDS: Record<string, string> = {
  running: 'Running', shutoff: 'Off', paused: 'Paused', shutting_down: 'Shutting down', crashed: 'Crashed',
  pmsuspended: 'Suspended', blocked: 'Running (blocked on I/O)', nostate: 'Unknown', missing: 'No VM on the host',
}

export function pollInterval(instance: Instance | undefined, operation: Operation | undefined): number {
  if (operation && (operation.status === 'pending' || operation.status === 'running')) return 1000
  return instance && TRANSITIONAL.has(instance.status) ? 1000 : 2000
}

type Action = 'stop' | 'start' | 'reboot'

/** Resize (POST /instances/{id}/resize/): a flavor with the same GPUs, confirmed in a dialog; a refusal (409
 * `invalid_state`, `flavor_does_not_fit`, 422 `quota_exceeded`) stays in the dialog with the choice kept, until
 * another flavor is chosen. */
function ResizeButton({ vm, current, flavors, busy, onAccepted }: {
  vm: Instance
  current: Flavor | undefined
  flavors: Flavor[]
  busy: boolean
  onAccepted: (accepted: InstanceAccepted) => void
}) {
  const { canWrite } = useScope()
  const [opened, setOpened] = useState(false)
  const [choice, setChoice] = useState<string | null>(null)
  const choices = resizeChoices(current, flavors)
  const blocked = resizeBlocked(vm, canWrite, choices, busy)
  const resize = useMutation({
    mutationFn: (flavor: string) =>
      unwrap(api.POST('/api/v1/instances/{id}/resize/', { params: { path: { id: vm.id } }, body: { flavor } })),
    onSuccess: (accepted) => {
      setOpened(false)
      setChoice(null)
      onAccepted(accepted)
    },
  })
  const submit = useSubmitOnce(resize)
  const chosen = choices.find((f) => f.id === choice)
  const button = (
    <Button variant="default" disabled={blocked !== null} onClick={() => { resize.reset(); setOpened(true) }}
      data-testid="resize" aria-describedby={blocked ? 'resize-rule' : undefined}>
      Resize
    </Button>
  )
  return (
    <>
      {blocked ? (
        <Tooltip label={blocked}>
          <span>
            {button}
            <span id="resize-rule" hidden>{blocked}</span>
          </span>
        </Tooltip>
      ) : button}
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Resize ${vm.name}`} centered size="lg"
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <Stack>
          <Text size="sm">
            Now {current ? `${current.name} — ${sizeLabel(current)}` : vm.flavor}. A resize keeps the GPUs and the
            disk contents on the same host; the instance stays stopped afterwards. Billing rates the time after it
            at the new flavor.
          </Text>
          <Select label="New flavor" placeholder="Choose a flavor" value={choice}
            onChange={(value) => { resize.reset(); setChoice(value) }}
            data={choices.map((f) => ({ value: f.id, label: `${f.name} — ${sizeLabel(f)}` }))} allowDeselect={false}
            comboboxProps={{ withinPortal: false }} />
          <ProblemAlert error={resize.error} title="The resize was refused" />
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
            <Button disabled={!chosen} loading={resize.isPending} onClick={() => chosen && submit(chosen.id)}>
              {chosen ? `Resize to ${chosen.name}` : 'Resize'}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </>
  )
}

/** The audit events whose target is the instance (GET /audit-events/?target_type=compute.instance&target_id=),
 * newest first, server-paged. */
function InstanceAudit({ id }: { id: string }) {
  const events = usePaged(['audit-events', 'compute.instance', id], (cursor) =>
    unwrap(api.GET('/api/v1/audit-events/', {
      params: { query: { target_type: 'compute.instance', target_id: id, cursor, page_size: 20 } },
    })))
  const rows = events.data?.results ?? []
  if (events.isPending) return <Loader role="status" size="sm" aria-label="Loading the audit events" />
  return (
    <Stack gap="xs">
      <ProblemAlert error={events.error} title="The audit events could not be read" />
      {events.isSuccess && rows.length === 0 && !events.hasPrevious ? (
        <EmptyState title="No audit events">Changes made to this instance appear here.</EmptyState>
      ) : (
        <AuditTable events={rows} label="Audit events of the instance" testId="instance-audit-event" compact />
      )}
      <Pager pageNumber={events.pageNumber} hasNext={events.hasNext} hasPrevious={events.hasPrevious}
        onNext={events.goNext} onPrevious={events.goPrevious} loading={events.isFetching} />
    </Stack>
  )
}

/** The instance's subnet(s), security groups and SSH keys by name (the project's lists; an id is shown for one
 * the caller cannot list any more). */
function NetworkFacts({ vm }: { vm: Instance }) {
  const project = vm.project
  const list = <T,>(key: string, path: '/api/v1/subnets/' | '/api/v1/security-groups/' | '/api/v1/ssh-keys/') =>
    ({ queryKey: [key, project, 'all'], queryFn: () => unwrap(api.GET(path, { params: { query: { project, page_size: 500 } } })) as Promise<{ results: T[] }> })
  const subnets = useQuery(list<{ id: string; name: string; cidr: string }>('subnets', '/api/v1/subnets/'))
  const groups = useQuery({ ...list<{ id: string; name: string }>('security-groups', '/api/v1/security-groups/'), enabled: vm.ports.length > 0 })
  const keys = useQuery(list<{ id: string; name: string }>('ssh-keys', '/api/v1/ssh-keys/'))
  const name = <T extends { id: string; name: string }>(rows: T[] | undefined, id: string, label = (r: T) => r.name) => {
    const row = rows?.find((r) => r.id === id)
    return row ? label(row) : shortId(id)
  }
  const portSubnets = [...new Set(vm.ports.map((p) => p.subnet))]
  const portGroups = [...new Set(vm.ports.flatMap((p) => p.security_groups))]
  return (
    <>
      <dt>Subnet</dt>
      <dd data-testid="subnet">{portSubnets.map((id) => name(subnets.data?.results, id, (r) => `${r.name} (${r.cidr})`)).join(', ') || 'none'}</dd>
      <dt>Security groups</dt>
      <dd data-testid="security-groups">{portGroups.map((id) => name(groups.data?.results, id)).join(', ') || 'none'}</dd>
      <dt>SSH keys</dt>
      <dd data-testid="ssh-keys">{vm.ssh_keys.map((id) => name(keys.data?.results, id)).join(', ') || 'none'}</dd>
    </>
  )
}

/** This month's measured availability of the instance, from the organization's SLA report (GET /sla-reports/
 * ?organization=&period=&resource_id=): its row, or "no downtime recorded" when it has none. Left out when the
 * report cannot be read (the organization's billing readers and the project's members may). */
function Availability({ organization, id }: { organization: string; id: string }) {
  const period = currentPeriod()
  const reports = useQuery({
    queryKey: ['sla-reports', organization, period, id],
    queryFn: () => unwrap(api.GET('/api/v1/sla-reports/', {
      params: { query: { organization, period, resource_id: id, page_size: 10 } },
    })),
    enabled: Boolean(organization),
    staleTime: 60_000,
  })
  if (!reports.data) return null
  const row = reports.data.results.find((r) => r.resource_id === id)
  return (
    <Text size="sm" c="dimmed" data-testid="availability">
      Availability {period}: {availabilityLabel(row)}
    </Text>
  )
}

export function InstanceDetailPage() {
  const { id = '' } = useParams()
  const qc = useQueryClient()
  const navigate = useNavigate()
  const [operationId, setOperationId] = useState<string | null>(null)
  const flavorList = useFlavors().data
  const flavors = byId(flavorList)
  const scope = useScope()
  const organization = scope.project?.organization ?? scope.organization?.id ?? ''
  const images = byId(useImages().data)

  const operation = useQuery({
    queryKey: ['operation', operationId],
    queryFn: () => unwrap(api.GET('/api/v1/operations/{id}/', { params: { path: { id: operationId! } } })),
    enabled: Boolean(operationId),
    refetchInterval: (q) => (q.state.data && ['succeeded', 'failed', 'cancelled'].includes(q.state.data.status) ? false : 1000),
  })
  const instance = useQuery({
    queryKey: ['instance', id],
    queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/', { params: { path: { id } } })),
    refetchInterval: (q) => (q.state.error ? false : pollInterval(q.state.data, operation.data)),
  })
  /** A 202 of an action: show its instance at once and follow its operation (polled until it ends). */
  const accept = (accepted: InstanceAccepted) => {
    qc.setQueryData(['instance', id], accepted.instance)
    setOperationId(accepted.operation.id)
    void qc.invalidateQueries({ queryKey: ['instances'] })
    void qc.invalidateQueries({ queryKey: ['audit-events', 'compute.instance', id] })
  }
  const action = useMutation({
    mutationFn: (verb: Action) => {
      const path = { params: { path: { id } } }
      if (verb === 'stop') return unwrap(api.POST('/api/v1/instances/{id}/stop/', { ...path, body: { hard: false } }))
      if (verb === 'start') return unwrap(api.POST('/api/v1/instances/{id}/start/', path))
      return unwrap(api.POST('/api/v1/instances/{id}/reboot/', { ...path, body: { hard: false } }))
    },
    onSuccess: (accepted) => accept(accepted),
  })
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/instances/{id}/', { params: { path: { id } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['instances'] })
      void qc.invalidateQueries({ queryKey: ['instance', id] })
    },
  })
  const approve = useMutation({
    mutationFn: (remediation: string) =>
      unwrap(api.POST('/api/v1/remediations/{id}/approve/', { params: { path: { id: remediation } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['instance', id] }),
  })
  const [tab, setTab] = useUrlTab(['overview', 'log', 'audit'])
  const showLog = tab === 'log'
  const log = useQuery({
    queryKey: ['console-log', id],
    queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/console-log/', { params: { path: { id } } })),
    enabled: showLog,
    refetchInterval: showLog ? 5000 : false,
  })

  if (instance.error instanceof ApiError && instance.error.status === 404) return <NotFoundPage what="instance" />
  if (instance.isPending) return <Loader role="status" aria-label="Loading the instance" />
  if (instance.isError) return <ProblemAlert error={instance.error} />

  const vm = instance.data
  const flavor = flavors.get(vm.flavor)
  const gone = vm.status === 'deleted' || vm.status === 'deleting'
  const busy = action.isPending || remove.isPending || TRANSITIONAL.has(vm.status)
  const op = operation.data

  return (
    <Stack>
      <Anchor component={Link} to="/instances" size="sm">
        ← Instances
      </Anchor>
      <Group justify="space-between" align="center">
        <Group>
          <Title order={2}>{vm.name}</Title>
          <StatusBadge status={vm.status} />
          {TRANSITIONAL.has(vm.status) && <Loader role="status" size="xs" aria-label="Working" />}
          <Availability organization={organization} id={vm.id} />
        </Group>
        <Group gap="xs">
          <ConfirmButton
            label="Stop"
            title={`Stop ${vm.name}?`}
            message="The guest is asked to shut down (ACPI). Its disk and addresses are kept; GPUs stay reserved while it is stopped."
            variant="default"
            disabled={busy || vm.status !== 'active'}
            onConfirm={() => action.mutate('stop')}
          />
          <ConfirmButton
            label="Start"
            title={`Start ${vm.name}?`}
            message="The instance boots again on its host."
            variant="default"
            disabled={busy || vm.status !== 'stopped'}
            onConfirm={() => action.mutate('start')}
          />
          <ConfirmButton
            label="Reboot"
            title={`Reboot ${vm.name}?`}
            message="The guest is asked to restart; unsaved work in it is lost."
            variant="default"
            disabled={busy || vm.status !== 'active'}
            onConfirm={() => action.mutate('reboot')}
          />
          <ResizeButton vm={vm} current={flavor} flavors={flavorList ?? []} busy={busy}
            onAccepted={accept} />
          <ConfirmButton
            label="Delete"
            title={`Delete ${vm.name}?`}
            message="The instance and its disk are destroyed and its GPUs released. This cannot be undone."
            confirmLabel="Delete instance"
            color="red.9"
            disabled={remove.isPending || gone}
            onConfirm={() => remove.mutate(undefined, { onSuccess: () => navigate('/instances') })}
          />
        </Group>
      </Group>
      <ProblemAlert error={action.error ?? remove.error} title="The action was refused" />
      {vm.status === 'error' && (
        <ProblemAlert error={new Error(`${vm.error_code}: ${vm.error_reason}`)} title="The instance failed" />
      )}
      {vm.maintenance && (
        <Paper withBorder p="sm" radius="md" bg="yellow.0" data-testid="maintenance" role="status">
          <Stack gap="xs">
            <Text size="sm">{maintenanceText(vm.maintenance)}</Text>
            {(vm.maintenance.status === 'notice' || vm.maintenance.status === 'proposed') && (
              <Group>
                <ConfirmButton
                  label={vm.maintenance.status === 'notice' ? 'Move now' : 'Approve the move'}
                  title={`Move ${vm.name} to a healthy host now?`}
                  message="It is re-created on a healthy host now: its root disk is created again from the image (attached volumes follow it), its ports and addresses stay."
                  confirmLabel="Move now"
                  variant="default"
                  disabled={approve.isPending}
                  onConfirm={() => approve.mutate(vm.maintenance!.remediation)}
                />
              </Group>
            )}
            <ProblemAlert error={approve.error} title="The move was refused" />
          </Stack>
        </Paper>
      )}
      {op && (
        <Text size="sm" c="dimmed" aria-live="polite" data-testid="operation">
          Last operation: {operationText(op)}
        </Text>
      )}
      <Tabs value={tab} onChange={setTab} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="overview">Overview</Tabs.Tab>
          <Tabs.Tab value="log">Console log</Tabs.Tab>
          <Tabs.Tab value="audit">Audit events</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="overview" pt="md">
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>Flavor</dt>
                <dd data-testid="flavor">{flavor ? `${flavor.name} — ${gpuLabel(flavor)}` : vm.flavor}</dd>
                <dt>Size</dt>
                <dd data-testid="size">{flavor ? sizeLabel(flavor) : '—'}</dd>
                <dt>Image</dt>
                <dd>{imageLabel(images.get(vm.image))}</dd>
                <dt>Power state</dt>
                <dd>{vm.observed_state ? POWER_WORDS[vm.observed_state] ?? vm.observed_state : '—'}</dd>
              </dl>
            </Paper>
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>ID</dt>
                <dd>
                  <Code>{vm.id}</Code>
                </dd>
                <dt>Addresses</dt>
                <dd>{vm.ports.flatMap((p) => p.fixed_ips).join(', ') || 'none (no subnet)'}</dd>
                <NetworkFacts vm={vm} />
                <dt>Created</dt>
                <dd>{new Date(vm.created_at).toLocaleString()}</dd>
                <dt>Launched</dt>
                <dd>{vm.launched_at ? new Date(vm.launched_at).toLocaleString() : '—'}</dd>
                <dt>Health</dt>
                <dd>
                  <Anchor component={Link} to={`/health-events?instance=${vm.id}`}>
                    Health events of {vm.name}
                  </Anchor>
                </dd>
              </dl>
            </Paper>
          </SimpleGrid>
        </Tabs.Panel>
        <Tabs.Panel value="log" pt="md">
          <ProblemAlert error={log.error} title="No console log" color="gray" />
          {log.isPending && showLog && <Loader role="status" size="sm" aria-label="Loading the console log" />}
          {log.data && (
            <ScrollArea h={360} type="auto">
              <Code block data-testid="console-log">
                {log.data.log || '(the console is empty so far)'}
              </Code>
            </ScrollArea>
          )}
          <Button variant="subtle" size="xs" mt="xs" onClick={() => void log.refetch()} disabled={!showLog}>
            Refresh
          </Button>
        </Tabs.Panel>
        <Tabs.Panel value="audit" pt="md">
          <InstanceAudit id={vm.id} />
        </Tabs.Panel>
      </Tabs>
    </Stack>
  )
}
