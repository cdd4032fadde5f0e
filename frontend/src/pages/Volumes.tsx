import { Anchor, Button, Code, Group, NumberInput, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useEffect, useState, type FormEvent } from 'react'
import { api, unwrap, type Instance, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar, SearchFilter } from '../components/ListFilters'
import { NoMatch } from '../components/ResourceTable'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { StatusBadge } from '../components/StatusBadge'
import { WriteButton } from '../components/WriteButton'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { shortId } from '../shortId'

export type Volume = Schemas['VolumeOutput']
export type VolumeType = Schemas['VolumeTypeOutput']
const VOLUME_STATUSES: Volume['status'][] = ['creating', 'available', 'attaching', 'in-use', 'detaching', 'extending',
  'deleting', 'deleted', 'error']
export type Snapshot = Schemas['SnapshotOutput']

/** Volume and snapshot statuses an operation is still working on (the list polls every 2 s; snapshots while one
 * is in such a status). */
export const VOLUME_BUSY = new Set(['creating', 'attaching', 'detaching', 'extending', 'deleting'])

/** Volumes attach to instances in these states (the API answers 409 `invalid_state` for the others). */
const ATTACHABLE = new Set(['active', 'stopped'])

export interface CreateForm {
  name: string
  volumeType: string | null
  sizeGib: number | string
  snapshot: string | null
}

/** The POST /volumes/ body of the create form: a restore from a snapshot takes the snapshot's type (and at least
 * its size, so an empty size is left to the API); a new empty volume names its type and size. */
export function createBody(project: string, form: CreateForm): Schemas['VolumeCreateInputRequest'] {
  const size = form.sizeGib === '' ? null : Number(form.sizeGib)
  const common = { project, name: form.name, description: '', delete_on_termination: false }
  if (form.snapshot) return { ...common, source_snapshot: form.snapshot, ...(size ? { size_gib: size } : {}) }
  return { ...common, volume_type: form.volumeType, size_gib: size }
}

/** "vm-1 (vdb)" for each instance a volume is attached to (an instance not on this page: its id's first 8). */
export function attachedTo(volume: Pick<Volume, 'attachments'>, names: Map<string, string>): string {
  if (!volume.attachments.length) return '—'
  return volume.attachments.map((a) => `${names.get(a.instance) ?? shortId(a.instance)} (${a.device})`).join(', ')
}

/** The guest's name for the disk: /dev/disk/by-id/virtio-<the volume id without dashes, first 20 characters>. */
export function guestPath(volumeId: string): string {
  return `/dev/disk/by-id/virtio-${volumeId.replaceAll('-', '').slice(0, 20)}`
}

function useInvalidate() {
  const qc = useQueryClient()
  return () => {
    void qc.invalidateQueries({ queryKey: ['volumes'] })
    void qc.invalidateQueries({ queryKey: ['snapshots'] })
  }
}

/** The project's block storage (`/volumes/`, `/snapshots/`): create a volume (empty, or restored from a
 * snapshot), and per volume resize it, attach it to or detach it from an instance, take, restore and delete
 * snapshots, delete it. Errors show the API's problem `detail` in the panel of the action, on the field it names. */
export function VolumesPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const invalidate = useInvalidate()
  const types = useQuery({
    queryKey: ['volume-types'],
    queryFn: () => unwrap(api.GET('/api/v1/volume-types/', { params: { query: { page_size: 100 } } })),
  })
  const instances = useQuery({
    queryKey: ['instances', pid, 'for-volumes'],
    queryFn: () => unwrap(api.GET('/api/v1/instances/', { params: { query: { project: pid, page_size: 500 } } })),
    enabled: Boolean(pid),
  })
  const snapshots = useQuery({
    queryKey: ['snapshots', pid],
    queryFn: () => unwrap(api.GET('/api/v1/snapshots/', { params: { query: { project: pid, page_size: 500 } } })),
    enabled: Boolean(pid),
    refetchInterval: (q) => ((q.state.data?.results ?? []).some((s) => VOLUME_BUSY.has(s.status)) ? 2000 : false),
  })
  const filters = useListFilters({ name_contains: '', status: null as Volume['status'] | null })
  const volumes = usePaged(
    ['volumes', pid, filters.query],
    (cursor) => unwrap(api.GET('/api/v1/volumes/', { params: { query: { project: pid, ...filters.query, cursor, page_size: 50 } } })),
    { refetchInterval: 2000, enabled: Boolean(pid) },
  )
  const rows = volumes.data?.results ?? []
  const typeNames = new Map((types.data?.results ?? []).map((t) => [t.id, t.name]))
  const instanceList = (instances.data?.results ?? []).filter((i) => i.status !== 'deleted')
  const instanceNames = new Map(instanceList.map((i) => [i.id, i.name]))
  const liveSnapshots = (snapshots.data?.results ?? []).filter((s) => s.status !== 'deleted')
  const [selected, setSelected] = useState<string | null>(null)
  const current = rows.find((v) => v.id === selected) ?? null

  const [form, setForm] = useState<CreateForm>({ name: '', volumeType: null, sizeGib: 10, snapshot: null })
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/volumes/', { body: createBody(pid, form) })),
    onSuccess: (answer) => {
      setForm({ name: '', volumeType: form.volumeType, sizeGib: 10, snapshot: null })
      setSelected(answer.volume.id)
      invalidate()
    },
  })
  const submitCreate = useSubmitOnce(create)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitCreate()
  }
  const typeOptions = (types.data?.results ?? []).map((t) => ({
    value: t.id,
    label: `${t.name}${t.iops_class ? ` (${t.iops_class})` : ''}, ${t.min_size_gib}–${t.max_size_gib} GiB`,
  }))
  const snapshotOptions = liveSnapshots
    .filter((s) => s.status === 'available')
    .map((s) => ({ value: s.id, label: `${s.name} (${s.size_gib} GiB)` }))

  return (
    <Stack>
      <Title order={2}>Volumes</Title>
      <Text c="dimmed">
        Block storage that outlives an instance: attach a volume to an active or stopped instance of this project
        and it appears in the guest as a virtio disk; snapshots are full copies you can restore into a new volume.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="create-volume">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="create-volume">
              Create a volume
            </Title>
            <ProblemAlert error={create.error} title="The volume was not created"
              shownFields={['name', 'volume_type', 'size_gib', 'source_snapshot']} />
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <TextInput label="Name" required maxLength={255} value={form.name}
                onChange={(e) => setForm({ ...form, name: e.currentTarget.value })}
                error={fieldError(create.error, 'name')} disabled={!canWrite} />
              <Select label="Type" description="The storage tier" placeholder="Choose a type" data={typeOptions}
                value={form.volumeType} onChange={(v) => setForm({ ...form, volumeType: v })} allowDeselect={false}
                error={fieldError(create.error, 'volume_type')} disabled={!canWrite || Boolean(form.snapshot)} />
              <NumberInput label="Size (GiB)" description="Whole GiB; a restore is at least its snapshot's size"
                min={1} value={form.sizeGib} onChange={(v) => setForm({ ...form, sizeGib: v })} allowDecimal={false}
                error={fieldError(create.error, 'size_gib')} disabled={!canWrite} />
              <Select label="From snapshot (optional)" description="Restore a snapshot into the new volume" clearable
                placeholder="Empty volume" data={snapshotOptions} value={form.snapshot}
                onChange={(v) => setForm({ ...form, snapshot: v })} allowDeselect={false}
                error={fieldError(create.error, 'source_snapshot')} disabled={!canWrite} />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={create.isPending}>
                Create volume
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={volumes.error ?? types.error} />
      <FilterBar label="Filter volumes">
        <SearchFilter filters={filters} />
        <ChoiceFilter filters={filters} param="status" label="Filter by status" placeholder="Any status" data={VOLUME_STATUSES} />
      </FilterBar>
      {volumes.isSuccess && rows.length === 0 && !volumes.hasPrevious ? filters.active ? <NoMatch noun="volumes" filters={filters} /> : (
        <EmptyState title="No volumes yet">
          Create a volume above, then attach it to an instance: the guest sees a new disk, and the data stays when the
          instance is deleted.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Volumes">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Type</Table.Th>
              <Table.Th>Size</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Attached to</Table.Th>
              <Table.Th>Created</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((v) => (
              <Table.Tr key={v.id} aria-selected={v.id === selected}>
                <Table.Td>
                  {/* indigo.9: the default anchor shade is under 4.5:1 on a striped row (axe) */}
                  <Anchor component="button" type="button" onClick={() => setSelected(v.id)} c="indigo.9"
                    aria-label={`Manage volume ${v.name}`}>
                    {v.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>{typeNames.get(v.volume_type) ?? '—'}</Table.Td>
                <Table.Td>{v.size_gib} GiB</Table.Td>
                <Table.Td>
                  <StatusBadge status={v.status} />
                  {v.status === 'error' && v.error_reason && <Text size="xs" c="red.9">{v.error_reason}</Text>}
                </Table.Td>
                <Table.Td>{attachedTo(v, instanceNames)}</Table.Td>
                <Table.Td>{new Date(v.created_at).toLocaleString()}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager pageNumber={volumes.pageNumber} hasNext={volumes.hasNext} hasPrevious={volumes.hasPrevious}
        onNext={volumes.goNext} onPrevious={volumes.goPrevious} loading={volumes.isFetching} />
      {current && (
        <VolumePanel key={current.id} volume={current} typeName={typeNames.get(current.volume_type) ?? ''}
          instances={instanceList} instanceNames={instanceNames}
          snapshots={liveSnapshots.filter((s) => s.volume === current.id)} onClose={() => setSelected(null)} />
      )}
    </Stack>
  )
}

function VolumePanel({ volume, typeName, instances, instanceNames, snapshots, onClose }: {
  volume: Volume
  typeName: string
  instances: Instance[]
  instanceNames: Map<string, string>
  snapshots: Snapshot[]
  onClose: () => void
}) {
  const { canWrite } = useScope()
  const invalidate = useInvalidate()
  const id = volume.id
  const [size, setSize] = useState<number | string>(volume.size_gib)
  const [instance, setInstance] = useState<string | null>(null)
  const [snapName, setSnapName] = useState('')
  const [restoreName, setRestoreName] = useState('')
  const extend = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/volumes/{id}/extend/', { params: { path: { id } }, body: { size_gib: Number(size) } })),
    onSuccess: invalidate,
  })
  const attach = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/volumes/{id}/attach/', { params: { path: { id } }, body: { instance: instance ?? '' } })),
    onSuccess: () => {
      setInstance(null)
      invalidate()
    },
  })
  const detach = useMutation({
    mutationFn: (inst: string) => unwrap(api.POST('/api/v1/volumes/{id}/detach/', { params: { path: { id } }, body: { instance: inst } })),
    onSuccess: invalidate,
  })
  const snapshot = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/snapshots/', { body: { volume: id, name: snapName, description: '' } })),
    onSuccess: () => {
      setSnapName('')
      invalidate()
    },
  })
  const restore = useMutation({
    mutationFn: (snap: Snapshot) => unwrap(api.POST('/api/v1/volumes/', {
      body: { project: volume.project, name: restoreName || `${snap.name}-restored`, description: '', source_snapshot: snap.id,
        delete_on_termination: false },
    })),
    onSuccess: () => {
      setRestoreName('')
      invalidate()
    },
  })
  const removeSnapshot = useMutation({
    mutationFn: (sid: string) => unwrap(api.DELETE('/api/v1/snapshots/{id}/', { params: { path: { id: sid } } })),
    onSuccess: invalidate,
  })
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/volumes/{id}/', { params: { path: { id } } })),
    onSuccess: invalidate,
  })
  // a refusal answered the volume as it was: once its status moves on, the message is stale
  const resets = [extend.reset, attach.reset, detach.reset, snapshot.reset, remove.reset]
  // oxlint-disable-next-line react-hooks/exhaustive-deps -- the mutations' reset functions are stable
  useEffect(() => resets.forEach((reset) => reset()), [volume.status])
  const attachedIds = new Set(volume.attachments.map((a) => a.instance))
  const choices = instances
    .filter((i) => ATTACHABLE.has(i.status) && !attachedIds.has(i.id))
    .map((i) => ({ value: i.id, label: `${i.name} (${i.status})` }))
  const deleted = volume.status === 'deleted'
  const write = canWrite && !deleted

  return (
    <Paper withBorder p="md" component="section" aria-labelledby="volume-panel">
      <Stack gap="md">
        <Group justify="space-between">
          <Title order={3} size="h4" id="volume-panel">
            Volume {volume.name}
          </Title>
          <Button variant="default" size="xs" onClick={onClose}>
            Close
          </Button>
        </Group>
        <Group gap="lg">
          <StatusBadge status={volume.status} />
          <Text size="sm">{typeName} · {volume.size_gib} GiB</Text>
          <Text size="sm">In the guest: <Code>{guestPath(volume.id)}</Code></Text>
        </Group>
        {volume.error_code && (
          <Text size="sm" c="red.9">
            Last error: {volume.error_code} ({volume.error_reason})
          </Text>
        )}

        <Stack gap="xs" component="section" aria-labelledby="volume-resize">
          <Title order={4} size="h5" id="volume-resize">Resize</Title>
          <ProblemAlert error={extend.error} title="The volume was not resized" shownFields={['size_gib']} />
          <Group align="flex-start">
            <NumberInput label="New size (GiB)" description="Volumes only grow" min={1}
              allowDecimal={false} value={size} onChange={setSize} error={fieldError(extend.error, 'size_gib')}
              disabled={!write} w={260} />
            <WriteButton mt={24} onClick={() => extend.mutate()} loading={extend.isPending} disabled={deleted}>
              Resize
            </WriteButton>
          </Group>
        </Stack>

        <Stack gap="xs" component="section" aria-labelledby="volume-attachments">
          <Title order={4} size="h5" id="volume-attachments">Attachments</Title>
          <ProblemAlert error={attach.error ?? detach.error}
            title={attach.error ? 'The volume was not attached' : 'The volume was not detached'} shownFields={['instance']} />
          {volume.attachments.length > 0 && (
            <Table aria-label={`Attachments of ${volume.name}`}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Instance</Table.Th>
                  <Table.Th>Device</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th><span className="visually-hidden">Actions</span></Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {volume.attachments.map((a) => {
                  const name = instanceNames.get(a.instance) ?? a.instance
                  return (
                    <Table.Tr key={a.instance}>
                      <Table.Td>{name}{a.boot ? ' (boot volume)' : ''}</Table.Td>
                      <Table.Td><Code>{a.device}</Code></Table.Td>
                      <Table.Td>{a.status}</Table.Td>
                      <Table.Td ta="right">
                        <ConfirmButton label="Detach" aria-label={`Detach from ${name}`} title={`Detach ${volume.name} from ${name}?`}
                          message="Unmount it in the guest first: a running guest must release the disk." variant="outline" size="xs"
                          disabled={deleted || a.status !== 'attached'} loading={detach.isPending && detach.variables === a.instance}
                          onConfirm={() => detach.mutate(a.instance)} />
                      </Table.Td>
                    </Table.Tr>
                  )
                })}
              </Table.Tbody>
            </Table>
          )}
          <Group align="flex-start">
            <Select label="Instance" placeholder={choices.length ? 'Choose an instance' : 'No other active or stopped instance'}
              data={choices} value={instance} onChange={setInstance} error={fieldError(attach.error, 'instance')}
              disabled={!write} w={320} searchable allowDeselect={false} />
            <WriteButton mt={24} onClick={() => attach.mutate()} loading={attach.isPending} disabled={deleted || !instance}>
              Attach
            </WriteButton>
          </Group>
        </Stack>

        <Stack gap="xs" component="section" aria-labelledby="volume-snapshots">
          <Title order={4} size="h5" id="volume-snapshots">Snapshots</Title>
          <ProblemAlert error={snapshot.error ?? restore.error ?? removeSnapshot.error}
            title={snapshot.error ? 'The snapshot was not taken' : restore.error ? 'The snapshot was not restored' : 'The snapshot was not deleted'}
            shownFields={snapshot.error ? ['name'] : []} />
          <Group align="flex-start">
            <TextInput label="Snapshot name" maxLength={255} value={snapName} onChange={(e) => setSnapName(e.currentTarget.value)}
              error={fieldError(snapshot.error, 'name')} disabled={!write} w={260} />
            <WriteButton mt={24} onClick={() => snapshot.mutate()} loading={snapshot.isPending} disabled={deleted}>
              Take snapshot
            </WriteButton>
          </Group>
          {snapshots.length > 0 && (
            <>
              <TextInput label="Name of a restored volume (optional)" description="Default: the snapshot's name and “-restored”"
                value={restoreName} onChange={(e) => setRestoreName(e.currentTarget.value)} disabled={!canWrite} w={360} />
              <Table aria-label={`Snapshots of ${volume.name}`}>
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Name</Table.Th>
                    <Table.Th>Size</Table.Th>
                    <Table.Th>Status</Table.Th>
                    <Table.Th>Taken</Table.Th>
                    <Table.Th><span className="visually-hidden">Actions</span></Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {snapshots.map((s) => (
                    <Table.Tr key={s.id}>
                      <Table.Td>{s.name}</Table.Td>
                      <Table.Td>{s.size_gib} GiB</Table.Td>
                      <Table.Td>
                        <StatusBadge status={s.status} />
                        {s.status === 'error' && s.error_reason && <Text size="xs" c="red.9">{s.error_reason}</Text>}
                      </Table.Td>
                      <Table.Td>{new Date(s.created_at).toLocaleString()}</Table.Td>
                      <Table.Td ta="right">
                        <Group gap="xs" justify="flex-end">
                          <WriteButton size="xs" variant="outline" aria-label={`Restore ${s.name}`}
                            disabled={s.status !== 'available'} loading={restore.isPending && restore.variables?.id === s.id}
                            onClick={() => restore.mutate(s)}>
                            Restore
                          </WriteButton>
                          <ConfirmButton label="Delete" aria-label={`Delete snapshot ${s.name}`} title={`Delete the snapshot “${s.name}”?`}
                            message="Volumes restored from it keep their data." color="red.9" variant="outline" size="xs"
                            disabled={s.status !== 'available' && s.status !== 'error'}
                            loading={removeSnapshot.isPending && removeSnapshot.variables === s.id}
                            onConfirm={() => removeSnapshot.mutate(s.id)} />
                        </Group>
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </>
          )}
        </Stack>

        <Stack gap="xs" component="section" aria-labelledby="volume-delete">
          <Title order={4} size="h5" id="volume-delete">Delete</Title>
          <ProblemAlert error={remove.error} title="The volume was not deleted" />
          <Group>
            <ConfirmButton label="Delete volume" aria-label={`Delete volume ${volume.name}`} title={`Delete the volume “${volume.name}”?`}
              message="Its data is gone for good; its snapshots stay. An attached volume is refused: detach it first."
              color="red.9" variant="outline" disabled={deleted} loading={remove.isPending} onConfirm={() => remove.mutate()} />
          </Group>
        </Stack>
      </Stack>
    </Paper>
  )
}
