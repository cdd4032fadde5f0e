import {
  Autocomplete, Badge, Button, Checkbox, Code, Group, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title,
} from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type IbPartition } from '../api/client'
import { useScope } from '../auth/scope'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { FilterBar, SearchFilter } from '../components/ListFilters'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters } from '../hooks/useListFilters'
import { useRemove } from '../hooks/useRemove'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { usePaged } from '../hooks/usePaged'
import { useSubmitOnce } from '../hooks/useSubmitOnce'

type Membership = 'limited' | 'full'

/** The project's InfiniBand partitions (`/ib-partitions/`): create one on a fabric (the P_Key comes from the
 * provider's pool unless one is asked for), delete it (409 `in_use` while it has members), and open one to see
 * and change its members. */
export function IbPartitionsPanel() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const filters = useListFilters({ name_contains: '' }, 300, 'ib_')
  const partitions = usePaged(['ib-partitions', pid, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/ib-partitions/', { params: { query: { project: pid, ...filters.query, cursor, page_size: 50 } } })),
  )
  const [open, setOpen] = useState<string | null>(null)
  const create = useCreateForm({ name: '', fabric: '', pkey: '', ipoib: true }, {
    mutationFn: (v, idempotencyKey): Promise<IbPartition> =>
      unwrap(api.POST('/api/v1/ib-partitions/', {
        body: { project: pid, name: v.name.trim(), fabric: v.fabric.trim(), ipoib: v.ipoib, index0: false, ...(v.pkey.trim() ? { pkey: v.pkey.trim() } : {}) },
        params: { header: { 'Idempotency-Key': idempotencyKey } },
      })),
    invalidate: ['ib-partitions'],
    clear: ['name', 'pkey'],
    onSuccess: (created) => setOpen(created.id),
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/ib-partitions/{id}/', { params: { path: { id } } })),
    ['ib-partitions'], (id) => { if (open === id) setOpen(null) })
  const rows = partitions.data?.results ?? []
  const fabrics = [...new Set(rows.map((p) => p.fabric))].sort()
  const opened = rows.find((p) => p.id === open)

  return (
    <Stack>
      <Text c="dimmed">
        An InfiniBand partition isolates your instances’ RDMA traffic on the provider’s fabric: instances launched into it
        join as full members; other GUIDs of your instances may be added as limited members.
      </Text>
      <CreateForm id="create-ib-partition" title="Create an InfiniBand partition" error={create.error}
        errorTitle="The partition was not created" fields={['name', 'fabric', 'pkey', 'ipoib']} onSubmit={create.submit}
        submitLabel="Create partition" loading={create.mutation.isPending}>
        <SimpleGrid cols={{ base: 1, sm: 3 }}>
          <TextInput label="Partition name" description="Letters, digits, hyphens and underscores" required maxLength={63}
            {...create.text('name')} disabled={!canWrite} />
          <Autocomplete label="Fabric" description="As your provider named it, e.g. ib-compute" required data={fabrics}
            value={create.values.fabric} onChange={(v) => create.set('fabric', v)} error={create.errorOf('fabric')}
            disabled={!canWrite} />
          <TextInput label="P_Key (optional)" description="Default: the next free one of the provider’s pool"
            placeholder="e.g. 0x0110" maxLength={10} {...create.text('pkey')} disabled={!canWrite}
            styles={{ input: { fontFamily: 'monospace' } }} />
        </SimpleGrid>
        <Checkbox
          label="IPoIB (an IP-over-InfiniBand broadcast group on the partition)"
          checked={create.values.ipoib}
          onChange={(e) => create.set('ipoib', e.currentTarget.checked)}
          error={create.errorOf('ipoib')}
          disabled={!canWrite}
        />
      </CreateForm>
      <FilterBar label="Filter InfiniBand partitions">
        <SearchFilter filters={filters} />
      </FilterBar>
      <ProblemAlert error={partitions.error ?? remove.error} title={remove.error ? 'The partition was not deleted' : undefined} />
      <ResourceTable
        label="InfiniBand partitions"
        noun="partitions"
        rows={rows}
        rowKey={(p) => p.id}
        list={partitions}
        filters={filters}
        empty={{
          title: 'No InfiniBand partitions yet',
          text: 'Create a partition above, then choose it when you launch an instance: its HCA ports (or a virtual function’s GUID) join the partition once the instance is placed.',
        }}
        columns={[
          { header: 'Name', cell: (p) => p.name },
          { header: 'Fabric', cell: (p) => p.fabric },
          { header: 'P_Key', cell: (p) => <Code>{p.pkey_hex}</Code> },
          { header: 'IPoIB', cell: (p) => (p.ipoib ? `yes${p.mtu ? ` (MTU ${p.mtu})` : ''}` : 'no') },
          { header: 'Members', cell: (p) => p.members.length },
          { header: 'Created', cell: (p) => new Date(p.created_at).toLocaleString() },
        ]}
        actions={(p) => (
          <Group gap="xs" justify="flex-end" wrap="nowrap">
            <Button variant={open === p.id ? 'light' : 'default'} size="xs" aria-label={`Members of ${p.name}`}
              aria-expanded={open === p.id} onClick={() => setOpen(open === p.id ? null : p.id)}>
              Members
            </Button>
            <DeleteButton remove={remove} target={p.id} name={`Delete partition ${p.name}`}
              title={`Delete the partition “${p.name}”?`}
              message="Its P_Key goes back to the provider’s pool. A partition that still has members is refused: delete its instances and remove added members first." />
          </Group>
        )}
      />
      {opened && <PartitionMembers partition={opened} />}
    </Stack>
  )
}

/** A partition's members (from its representation) and the tenant's member writes: add a GUID of one of the
 * project's instances (`POST …/members/`, limited by default) and remove a member added that way
 * (`DELETE …/members/{guid}/`); a GUID that joined with its instance leaves with the instance (409 `in_use`). */
export function PartitionMembers({ partition }: { partition: IbPartition }) {
  const { project, canWrite } = useScope()
  const qc = useQueryClient()
  const [guid, setGuid] = useState('')
  const [membership, setMembership] = useState<Membership>('limited')
  const instances = useQuery({
    queryKey: ['instances', project?.id ?? '', 'names'],
    queryFn: () => unwrap(api.GET('/api/v1/instances/', { params: { query: { project: project?.id ?? '', page_size: 500 } } })),
    staleTime: 30_000,
  })
  const names = new Map((instances.data?.results ?? []).map((i) => [i.id, i.name]))
  const add = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/ib-partitions/{id}/members/', {
        params: { path: { id: partition.id } },
        body: { guid: guid.trim(), membership },
      })),
    onSuccess: () => {
      setGuid('')
      void qc.invalidateQueries({ queryKey: ['ib-partitions'] })
    },
  })
  const submitAdd = useSubmitOnce(add)
  const remove = useRemove((member: string) =>
    unwrap(api.DELETE('/api/v1/ib-partitions/{id}/members/{guid}/', { params: { path: { id: partition.id, guid: member } } })),
  ['ib-partitions'])
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitAdd()
  }

  return (
    <Paper withBorder p="md" component="section" aria-labelledby="ib-members">
      <Stack gap="sm">
        <Title order={3} size="h4" id="ib-members">
          Members of {partition.name} <Code>{partition.pkey_hex}</Code>
        </Title>
        <ProblemAlert error={remove.error} title="The member was not removed" />
        {partition.members.length === 0 ? (
          <Text c="dimmed" data-testid="no-members">
            No members yet: instances launched into this partition join it as full members.
          </Text>
        ) : (
          <Table aria-label={`Members of ${partition.name}`}>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>GUID</Table.Th>
                <Table.Th>Membership</Table.Th>
                <Table.Th>Instance</Table.Th>
                <Table.Th>Joined</Table.Th>
                <Table.Th>
                  <span className="visually-hidden">Actions</span>
                </Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {partition.members.map((m) => (
                <Table.Tr key={m.guid}>
                  <Table.Td>
                    <Code>{m.guid}</Code>
                  </Table.Td>
                  <Table.Td>
                    <Badge variant="light" color={m.membership === 'full' ? 'teal.9' : 'gray.7'}>{m.membership}</Badge>
                  </Table.Td>
                  <Table.Td>{m.instance_id ? names.get(m.instance_id) ?? m.instance_id : '—'}</Table.Td>
                  <Table.Td>{m.added_via_api ? 'added' : 'with its instance'}</Table.Td>
                  <Table.Td ta="right">
                    {m.added_via_api ? (
                      <DeleteButton remove={remove} target={m.guid} label="Remove" name={`Remove member ${m.guid}`}
                        title={`Remove ${m.guid} from ${partition.name}?`}
                        message="The GUID stops reaching the partition's members once the subnet manager applies the change." />
                    ) : (
                      <Text size="xs" c="dimmed">leaves with its instance</Text>
                    )}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
        <form onSubmit={submit} noValidate aria-label={`Add a member to ${partition.name}`}>
          <Stack gap="sm">
            <ProblemAlert error={add.error} title="The member was not added" shownFields={['guid', 'membership']} />
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <TextInput
                label="Port GUID"
                description="A GUID of one of this project's instances already in a partition on this fabric"
                placeholder="0x0c42a10300aa0001"
                required
                maxLength={23}
                value={guid}
                onChange={(e) => setGuid(e.currentTarget.value)}
                error={fieldError(add.error, 'guid')}
                disabled={!canWrite}
                styles={{ input: { fontFamily: 'monospace' } }}
              />
              <Select
                label="Membership"
                description="Limited members talk to full members only"
                data={[{ value: 'limited', label: 'Limited' }, { value: 'full', label: 'Full' }]}
                value={membership}
                onChange={(v) => setMembership((v as Membership | null) ?? 'limited')}
                allowDeselect={false}
                error={fieldError(add.error, 'membership')}
                disabled={!canWrite}
              />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={add.isPending}>
                Add member
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Stack>
    </Paper>
  )
}
