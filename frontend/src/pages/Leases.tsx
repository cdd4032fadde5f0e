import { Alert, Anchor, Badge, Button, Group, Modal, NumberInput, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query'
import { useDebouncedValue } from '@mantine/hooks'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useState, type FormEvent } from 'react'
import { Link } from 'react-router'
import { api, unwrap, type Flavor, type Lease, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar, SearchFilter } from '../components/ListFilters'
import { NoMatch } from '../components/ResourceTable'
import { LeaseCalendar } from '../components/LeaseCalendar'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { useFlavors } from '../hooks/catalog'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { money } from '../hooks/billing'
import { QuotaTable } from '../components/QuotaTable'
import { CheckRefused } from './Launch'
import { shortId } from '../shortId'

type Kind = 'gpus' | 'hosts' | 'mig'
const KINDS: { value: Kind; label: string }[] = [
  { value: 'gpus', label: 'Whole GPUs' },
  { value: 'hosts', label: 'Whole hosts' },
  { value: 'mig', label: 'MIG slices' },
]

/** Statuses a lease may still be cancelled from (the API's `cancel` transition), and whose end and size may still
 * change (`PATCH /leases/{id}/`: a finished lease can only be renamed); finished ones are history. */
export const CANCELLABLE = new Set<Schemas['LeaseOutputStatusEnum']>(['requested', 'confirmed', 'active', 'ending'])

export type QueuedRequest = Schemas['QueuedRequestOutput']

const STATUS_COLORS: Record<string, string> = {
  requested: 'blue.8', confirmed: 'violet.8', active: 'teal.9', ending: 'grape.8', ended: 'gray.7',
  cancelled: 'gray.7', rejected: 'red.9',
}

export interface LeaseForm {
  name: string
  kind: Kind
  gpuModel: string
  migProfile: string
  count: number
  start: string // datetime-local: 2026-12-04T09:00
  end: string
  timeZone: string
}

/** The `POST /leases/` body: the window as 'YYYY-MM-DD HH:MM' in the browser's time zone (the API's local form). */
export function leaseBody(project: string, form: LeaseForm): Schemas['LeaseCreateInputRequest'] {
  const local = (value: string) => value.replace('T', ' ')
  return {
    project, name: form.name, kind: form.kind, gpu_model: form.gpuModel, count: form.count,
    start: local(form.start), end: local(form.end), time_zone: form.timeZone,
    mig_profile: form.kind === 'mig' ? form.migProfile : '', share_milli: 0, zone: '', end_action: 'stop', notice_s: 3600,
    sla_tier: '', // the organization's default tier
  }
}

/** GPU models of the catalog, and the MIG profiles offered for each (from the MIG flavors). */
export function leaseChoices(flavors: Flavor[]): { models: string[]; profiles: Map<string, string[]> } {
  const models = new Set<string>()
  const profiles = new Map<string, string[]>()
  for (const f of flavors) {
    if (!f.gpu_model || f.gpu_form === 'none') continue
    models.add(f.gpu_model)
    if (f.gpu_form === 'mig' && f.mig_profile) {
      const list = profiles.get(f.gpu_model) ?? []
      if (!list.includes(f.mig_profile)) profiles.set(f.gpu_model, [...list, f.mig_profile])
    }
  }
  return { models: [...models].sort(), profiles }
}

/** "4 × H100 GPUs", "2 hosts of H100", "3 × MIG 3g.40gb on H100". */
export function leaseSize(lease: Pick<Lease, 'kind' | 'count' | 'gpu_model' | 'mig_profile' | 'share_milli'>): string {
  if (lease.kind === 'hosts') return `${lease.count} ${lease.count === 1 ? 'host' : 'hosts'} of ${lease.gpu_model}`
  if (lease.kind === 'mig') return `${lease.count} × MIG ${lease.mig_profile} on ${lease.gpu_model}`
  if (lease.kind === 'shares') return `${lease.count} × ${(lease.share_milli / 1000).toFixed(2)} of a ${lease.gpu_model}`
  return `${lease.count} × ${lease.gpu_model} ${lease.count === 1 ? 'GPU' : 'GPUs'}`
}

/** An instant as a `datetime-local` value in the browser's time zone ('2026-12-12T09:00'). */
export function toLocalInput(iso: string): string {
  const d = new Date(iso)
  const two = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`
}

/** "2 d 3 h", "45 min": the length of a move of the end. */
function span(ms: number): string {
  const minutes = Math.round(Math.abs(ms) / 60_000)
  const d = Math.floor(minutes / 1440)
  const h = Math.floor((minutes % 1440) / 60)
  const m = minutes % 60
  return [d && `${d} d`, h && `${h} h`, m && `${m} min`].filter(Boolean).join(' ') || '0 min'
}

export interface LeaseChange {
  /** The `PATCH /leases/{id}/` body: only what changes (`end` as ISO 8601 UTC, `count`). */
  body: { end?: string; count?: number }
  /** "Extend", "Shrink", "Grow", "Change" (both), or null when nothing changes. */
  verb: 'Extend' | 'Shrink' | 'Grow' | 'Reduce' | 'Change' | null
  /** What the change does, in words, for the confirmation. */
  sentences: string[]
}

/** The change a person asks for in the change dialog: `end` a `datetime-local` value (browser time zone), `count`
 * the new size. A later end extends the lease, an earlier one shrinks it; a larger count grows it (a started lease
 * gets the added capacity from now; it cannot give capacity back, the server refuses with `lease_field_immutable`). */
export function leaseChange(lease: Pick<Lease, 'end' | 'count' | 'kind' | 'gpu_model' | 'mig_profile' | 'share_milli'>, end: string, count: number): LeaseChange {
  const body: LeaseChange['body'] = {}
  const sentences: string[] = []
  let verb: LeaseChange['verb'] = null
  const before = new Date(lease.end).getTime()
  const after = end ? new Date(end).getTime() : NaN
  if (!Number.isNaN(after) && after !== before) {
    body.end = new Date(after).toISOString()
    verb = after > before ? 'Extend' : 'Shrink'
    sentences.push(`${verb === 'Extend' ? 'Extends' : 'Shrinks'} the lease by ${span(after - before)}: it ends ${new Date(after).toLocaleString()} instead of ${new Date(before).toLocaleString()}.`)
  }
  if (count !== lease.count && count >= 1) {
    body.count = count
    const grow = count > lease.count
    verb = verb ? 'Change' : grow ? 'Grow' : 'Reduce'
    sentences.push(`${grow ? 'Grows' : 'Reduces'} it from ${leaseSize(lease)} to ${leaseSize({ ...lease, count })}.`)
  }
  return { body, verb, sentences }
}

/** Extend, shrink or grow one lease: a dialog with its end and size, the change stated in words before it is sent
 * (`PATCH /leases/{id}/`, one transaction); a refusal is shown on the field it names (until that value is edited)
 * and the dialog keeps the values. */
function ChangeLease({ lease }: { lease: Lease }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const [end, setEnd] = useState('')
  const [count, setCount] = useState(lease.count)
  const change = leaseChange(lease, end, count)
  const save = useMutation({
    mutationFn: () => unwrap(api.PATCH('/api/v1/leases/{id}/', { params: { path: { id: lease.id } }, body: change.body })),
    onSuccess: () => {
      setOpened(false)
      void qc.invalidateQueries({ queryKey: ['leases'] })
    },
  })
  const open = () => {
    setEnd(toLocalInput(lease.end))
    setCount(lease.count)
    save.reset()
    setOpened(true)
  }
  const unit = lease.kind === 'hosts' ? 'Hosts' : lease.kind === 'mig' ? 'Slices' : lease.kind === 'shares' ? 'Shares' : 'GPUs'
  const started = lease.status === 'active' || lease.status === 'ending'
  return (
    <>
      <WriteButton variant="default" size="xs" onClick={open} aria-label={`Extend or shrink lease ${lease.name}`}>
        Extend or shrink
      </WriteButton>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`Change the lease “${lease.name}”`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); if (change.verb) save.mutate() }} noValidate>
          <Stack gap="sm">
            <ProblemAlert error={save.error} title="The lease was not changed" shownFields={['end', 'count']} />
            <TextInput type="datetime-local" label="End" description={`Now ${new Date(lease.end).toLocaleString()}`}
              value={end} onChange={(e) => { save.reset(); setEnd(e.currentTarget.value) }} error={fieldError(save.error, 'end')} />
            <NumberInput label={unit} min={1} max={4096} value={count}
              description={started ? 'A started lease can grow; to give capacity back, shrink its end or cancel it.' : `Now ${lease.count}`}
              onChange={(v) => { save.reset(); setCount(typeof v === 'number' ? v : Number(v) || lease.count) }}
              error={fieldError(save.error, 'count')} />
            <div data-testid="lease-change-summary" aria-live="polite">
              {change.sentences.length ? change.sentences.map((line) => <Text key={line} size="sm">{line}</Text>) : (
                <Text size="sm" c="dimmed">Move the end or change the size to see what changes.</Text>
              )}
            </div>
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" disabled={!change.verb} loading={save.isPending}>
                {change.verb ? `${change.verb} lease` : 'Change lease'}
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** The project's on-demand requests waiting for capacity (`/queued-requests/?status=waiting`): the instance or
 * cluster (linked), its place in the queue, why it waits and until when; Cancel deletes the waiting instance or
 * cluster (the API's way to leave the queue; it was never placed). */
function OnDemandQueue({ project }: { project: string }) {
  const qc = useQueryClient()
  const queue = usePaged(
    ['queued-requests', project],
    (cursor) => unwrap(api.GET('/api/v1/queued-requests/', { params: { query: { project, status: 'waiting', cursor, page_size: 20 } } })),
    { enabled: Boolean(project), refetchInterval: 5000 },
  )
  const rows = queue.data?.results ?? []
  const names = useQueries({
    queries: rows.map((q) => q.instance
      ? { queryKey: ['instance', q.instance], staleTime: 30_000, retry: false,
          queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/', { params: { path: { id: q.instance! } } })).then((i) => i.name) }
      : { queryKey: ['cluster', q.cluster], staleTime: 30_000, retry: false,
          queryFn: () => unwrap(api.GET('/api/v1/clusters/{id}/', { params: { path: { id: q.cluster! } } })).then((c) => c.name) }),
  })
  const leave = useMutation({
    mutationFn: async (q: QueuedRequest): Promise<void> => {
      if (q.instance) await unwrap(api.DELETE('/api/v1/instances/{id}/', { params: { path: { id: q.instance } } }))
      else await unwrap(api.DELETE('/api/v1/clusters/{id}/', { params: { path: { id: q.cluster! } } }))
    },
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['queued-requests'] }),
  })
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="queue-title" data-testid="on-demand-queue">
      <Stack gap="sm">
        <Title order={3} size="h4" id="queue-title">On-demand queue</Title>
        <Text size="sm" c="dimmed">
          Instances and clusters launched with “Queue until it fits” (offered at the launch’s review when the fleet is full) wait here, in queue order, until the capacity they
          need frees up; each is placed as soon as it fits, or gives up at its deadline.
        </Text>
        <ProblemAlert error={queue.error ?? leave.error} title={leave.error ? 'The request was not cancelled' : undefined} />
        {queue.isSuccess && rows.length === 0 && !queue.hasPrevious ? (
          <Text size="sm" c="dimmed" data-testid="queue-empty">
            Nothing of this project is waiting. When the fleet is full, choose “Queue until it fits” at the launch’s review to wait here for
            capacity instead of being refused.
          </Text>
        ) : (
          <Table striped aria-label="On-demand queue">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Position</Table.Th>
                <Table.Th>Waiting</Table.Th>
                <Table.Th>Why it waits</Table.Th>
                <Table.Th>Since</Table.Th>
                <Table.Th>Gives up</Table.Th>
                <Table.Th><span className="visually-hidden">Actions</span></Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map((q, i) => {
                const name = names[i]?.data ?? shortId(q.instance ?? q.cluster)
                const kind = q.instance ? 'instance' : 'cluster'
                return (
                  <Table.Tr key={q.id} data-testid="queued-request">
                    <Table.Td data-testid="queue-position">{q.position ?? '—'}</Table.Td>
                    <Table.Td>
                      <Anchor component={Link} to={q.instance ? `/instances/${q.instance}` : `/clusters/${q.cluster}`}>{name}</Anchor>
                      <Text size="xs" c="dimmed">{kind}</Text>
                    </Table.Td>
                    <Table.Td><Text size="sm" maw={360}>{q.reason || '—'}</Text></Table.Td>
                    <Table.Td>{new Date(q.created_at).toLocaleString()}</Table.Td>
                    <Table.Td>{new Date(q.expires_at).toLocaleString()}</Table.Td>
                    <Table.Td ta="right">
                      <ConfirmButton label="Cancel" aria-label={`Cancel the queued ${kind} ${name}`}
                        title={`Stop waiting for “${name}”?`}
                        message={`The ${kind} leaves the queue and is deleted; it was never placed and nothing of it is billed.`}
                        confirmLabel={`Delete ${kind}`} color="red.9" variant="outline" size="xs"
                        loading={leave.isPending && leave.variables?.id === q.id} onConfirm={() => leave.mutate(q)} />
                    </Table.Td>
                  </Table.Tr>
                )
              })}
            </Table.Tbody>
          </Table>
        )}
        <Pager pageNumber={queue.pageNumber} hasNext={queue.hasNext} hasPrevious={queue.hasPrevious}
          onNext={queue.goNext} onPrevious={queue.goPrevious} loading={queue.isFetching} />
      </Stack>
    </Paper>
  )
}

const LEASE_STATUSES: Lease['status'][] = ['requested', 'confirmed', 'active', 'ending', 'ended', 'cancelled', 'rejected']

function browserZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
  } catch {
    return 'UTC'
  }
}

/** Leases (`/leases`): the project's reserved capacity with its window and status, on a four-week calendar and in a
 * table; request one; extend, shrink or grow one; cancel one; and the project's on-demand queue with positions. */
type LeaseCheckAnswer = Schemas['PlacementCheckOutput']

/** Whether the form's lease can be confirmed as asked, at what price over its window, and the quota it uses
 * (`POST /leases/check/`: the create's own checks, nothing written; GPU quotas at the busiest moment of the
 * window). Asked once the window is filled in, again after each change (debounced). */
function LeaseCheck({ body }: { body: Schemas['LeaseCreateInputRequest'] | null }) {
  const [debounced] = useDebouncedValue(body, 400)
  const check = useQuery({
    queryKey: ['lease-check', debounced],
    queryFn: () => unwrap(api.POST('/api/v1/leases/check/', { body: debounced! })),
    enabled: debounced != null,
    retry: false,
  })
  if (debounced == null) return null
  const answer: LeaseCheckAnswer | undefined = check.data
  const price = answer?.price
  return (
    <Paper withBorder p="sm" aria-live="polite" data-testid="lease-check">
      {check.isFetching && !answer && <Text c="dimmed" size="sm">Checking the window…</Text>}
      <CheckRefused error={check.error} />
      {answer && (
        <Stack gap="xs">
          <Group>
            {answer.placeable ? (
              <Badge color="teal.9" size="lg">Can be confirmed</Badge>
            ) : answer.code === 'capacity_unavailable' ? (
              <Badge color="yellow.4" autoContrast size="lg">No capacity in this window</Badge>
            ) : (
              <Badge color="red.9" size="lg">Would be refused</Badge>
            )}
            {price?.estimate_total != null && (
              <Text fw={600} data-testid="lease-price">
                About {money(price.estimate_total, price.currency)} for the window
                <Text span c="dimmed" size="sm">
                  {' '}({money(price.per_hour, price.currency)} per hour, {price.sla_tier} tier, reserved; an estimate)
                </Text>
              </Text>
            )}
            {price && price.per_hour == null && <Text c="dimmed">No reserved price for this GPU model yet.</Text>}
          </Group>
          {answer.detail && (
            <Text size="sm">
              <strong>Why:</strong> {answer.detail}
            </Text>
          )}
          {answer.earliest_start && (
            <Text size="sm">
              <strong>Fits from:</strong> {new Date(answer.earliest_start).toLocaleString()} (same length)
            </Text>
          )}
          {answer.start && body && new Date(answer.start).getTime() !== new Date(body.start.replace(' ', 'T')).getTime() && (
            <Text size="sm">
              <strong>Would start:</strong> {new Date(answer.start).toLocaleString()} (spot work on these GPUs is owed its notice)
            </Text>
          )}
          {answer.quota.length > 0 && (
            <QuotaTable lines={answer.quota} label="Quota this lease uses" used="Held at the busiest moment"
              adds="This lease" />
          )}
        </Stack>
      )}
    </Paper>
  )
}

export function LeasesPage() {
  const { project, canWrite } = useScope()
  const qc = useQueryClient()
  const pid = project?.id ?? ''
  const flavors = useFlavors()
  const { models, profiles } = leaseChoices(flavors.data ?? [])
  const filters = useListFilters({ name_contains: '', status: null as Lease['status'] | null })
  const leases = usePaged(
    ['leases', pid, filters.query],
    (cursor) => unwrap(api.GET('/api/v1/leases/', { params: { query: { project: pid, ...filters.query, cursor, page_size: 20 } } })),
    { refetchInterval: 5000 },
  )
  const [form, setForm] = useState<LeaseForm>({
    name: '', kind: 'gpus', gpuModel: '', migProfile: '', count: 1, start: '', end: '', timeZone: browserZone(),
  })
  // a change to the form clears the last refusal (its field errors described the values sent, not these) and the
  // last "requested" notice
  const set = <K extends keyof LeaseForm>(key: K, value: LeaseForm[K]) => {
    setForm((f) => ({ ...f, [key]: value }))
    if (create.error || requested) create.reset()
    setRequested(null)
  }
  const [requested, setRequested] = useState<Lease | null>(null)
  const model = form.gpuModel || models[0] || ''
  const migProfiles = profiles.get(model) ?? []
  const create = useMutation({
    mutationFn: (): Promise<Lease> =>
      unwrap(api.POST('/api/v1/leases/', {
        params: { header: { 'Idempotency-Key': submitCreate.idempotencyKey.current } },
        body: leaseBody(pid, { ...form, gpuModel: model, migProfile: form.migProfile || migProfiles[0] || '' }),
      })),
    onSuccess: (lease) => {
      // the window and size are cleared with the name, so the form is not read as unsent (and the check does not go
      // on answering for a second, identical lease); the kind, model and time zone stay for the next request
      setForm((f) => ({ ...f, name: '', count: 1, start: '', end: '' }))
      setRequested(lease)
      void qc.invalidateQueries({ queryKey: ['leases'] })
    },
  })
  const cancel = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/api/v1/leases/{id}/cancel/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['leases'] }),
  })
  const submitCreate = useSubmitOnce(create)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitCreate()
  }
  const rows = leases.data?.results ?? []

  return (
    <Stack>
      <Title order={2}>Leases</Title>
      <Text c="dimmed">
        Capacity reserved for this project over a window: the GPUs are held for you from the start to the end, and
        instances you launch in the window use them.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="request-lease">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="request-lease">
              Request a lease
            </Title>
            <ProblemAlert error={create.error} title="The lease was not created"
              shownFields={['name', 'kind', 'gpu_model', 'mig_profile', 'count', 'start', 'end']} />
            {requested && (
              <Alert color="green" role="status" data-testid="lease-requested"
                title={<Text span fw={700} size="sm" c="var(--mantine-color-text)">{`Lease “${requested.name}” requested`}</Text>}>
                It is {requested.status}; it appears in the list below{requested.status === 'requested' ? '; its capacity is held once it is confirmed' : ''}.
              </Alert>
            )}
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
              <TextInput label="Name" required maxLength={63} value={form.name} onChange={(e) => set('name', e.currentTarget.value)}
                error={fieldError(create.error, 'name')} disabled={!canWrite} />
              <Select label="GPU model" required data={models} value={model || null} onChange={(v) => v && set('gpuModel', v)}
                allowDeselect={false} placeholder={models.length ? undefined : 'No GPU flavors offered'}
                error={fieldError(create.error, 'gpu_model')} disabled={!canWrite} />
              <Select label="What to reserve" required data={KINDS} value={form.kind} onChange={(v) => v && set('kind', v as Kind)}
                allowDeselect={false} error={fieldError(create.error, 'kind')} disabled={!canWrite} />
              {form.kind === 'mig' ? (
                <Select label="MIG profile" required data={migProfiles} value={form.migProfile || migProfiles[0] || null}
                  onChange={(v) => v && set('migProfile', v)} allowDeselect={false}
                  placeholder={migProfiles.length ? undefined : 'No MIG flavors of this model'}
                  error={fieldError(create.error, 'mig_profile')} disabled={!canWrite} />
              ) : (
                <div />
              )}
              <NumberInput label={form.kind === 'hosts' ? 'Hosts' : form.kind === 'mig' ? 'Slices' : 'GPUs'} required min={1}
                max={4096} value={form.count} onChange={(v) => set('count', typeof v === 'number' ? v : Number(v) || 1)}
                error={fieldError(create.error, 'count')} disabled={!canWrite} />
              <TextInput type="datetime-local" label="Start" required value={form.start}
                onChange={(e) => set('start', e.currentTarget.value)} error={fieldError(create.error, 'start')}
                disabled={!canWrite} />
              <TextInput type="datetime-local" label="End" required value={form.end}
                onChange={(e) => set('end', e.currentTarget.value)} error={fieldError(create.error, 'end')}
                disabled={!canWrite} />
              <TextInput label="Time zone" description="Of the start and end" value={form.timeZone}
                onChange={(e) => set('timeZone', e.currentTarget.value)} error={fieldError(create.error, 'time_zone')}
                disabled={!canWrite} />
            </SimpleGrid>
            {canWrite && <LeaseCheck body={form.start && form.end && form.count >= 1 && model
              ? leaseBody(pid, { ...form, name: form.name || 'lease', gpuModel: model,
                  migProfile: form.migProfile || migProfiles[0] || '' })
              : null} />}
            <Group>
              <WriteButton type="submit" loading={create.isPending}>
                Request lease
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      {leases.isSuccess && rows.length > 0 && <LeaseCalendar leases={rows} size={leaseSize} />}
      <FilterBar label="Filter leases">
        <SearchFilter filters={filters} />
        <ChoiceFilter filters={filters} param="status" label="Filter by status" placeholder="Any status" data={LEASE_STATUSES} />
      </FilterBar>
      <ProblemAlert error={leases.error ?? cancel.error} title={cancel.error ? 'The lease was not cancelled' : undefined} />
      {leases.isSuccess && rows.length === 0 && !leases.hasPrevious ? filters.active ? <NoMatch noun="leases" filters={filters} /> : (
        <EmptyState title="No leases yet">
          Request one above to have GPUs held for this project over a window, for a training run or an event.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Leases">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Capacity</Table.Th>
              <Table.Th>Start</Table.Th>
              <Table.Th>End</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((lease) => (
              <Table.Tr key={lease.id}>
                <Table.Td>{lease.name}</Table.Td>
                <Table.Td>
                  <Badge color={STATUS_COLORS[lease.status] ?? 'gray.7'} variant="filled" data-testid="lease-status">
                    {lease.status}
                  </Badge>
                  {lease.reason && (
                    <Text size="xs" c="dimmed" maw={260}>
                      {lease.reason}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>{leaseSize(lease)}</Table.Td>
                <Table.Td>{new Date(lease.start).toLocaleString()}</Table.Td>
                <Table.Td>{new Date(lease.end).toLocaleString()}</Table.Td>
                <Table.Td ta="right">
                  {CANCELLABLE.has(lease.status) && (
                    <Group gap="xs" justify="flex-end" wrap="nowrap">
                      <ChangeLease lease={lease} />
                      <ConfirmButton
                        label="Cancel"
                        aria-label={`Cancel lease ${lease.name}`}
                        title={`Cancel the lease “${lease.name}”?`}
                        message={
                          lease.status === 'active' || lease.status === 'ending'
                            ? `Its capacity is released now and its instances are ${lease.end_action === 'delete' ? 'deleted' : 'stopped'}.`
                            : 'The reserved capacity is released; nothing has started yet.'
                        }
                        confirmLabel="Cancel lease"
                        color="red.9"
                        variant="outline"
                        size="xs"
                        loading={cancel.isPending && cancel.variables === lease.id}
                        onConfirm={() => cancel.mutate(lease.id)}
                      />
                    </Group>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={leases.pageNumber}
        hasNext={leases.hasNext}
        hasPrevious={leases.hasPrevious}
        onNext={leases.goNext}
        onPrevious={leases.goPrevious}
        loading={leases.isFetching}
      />
      <OnDemandQueue project={pid} />
    </Stack>
  )
}
