import { Anchor, Group, MultiSelect, NumberInput, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useMemo, useState, type FormEvent } from 'react'
import { Link } from 'react-router'
import { api, unwrap, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar, SearchFilter } from '../components/ListFilters'
import { NoMatch } from '../components/ResourceTable'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { StatusBadge } from '../components/StatusBadge'
import { WriteButton } from '../components/WriteButton'
import { byId, gpuLabel, imageLabel, useFlavors, useImages } from '../hooks/catalog'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'

type ClusterStatus = Schemas['ClusterOutputStatusEnum']
const CLUSTER_STATUSES: ClusterStatus[] = ['pending', 'active', 'deleting', 'deleted', 'error']

export interface ClusterForm {
  name: string
  flavor: string | null
  image: string | null
  size: number
  subnet: string | null
  sshKeys: string[]
}

/** The `POST /clusters/` body: the required fields, and the subnet and SSH keys only when chosen. */
export function clusterBody(form: ClusterForm, project: string) {
  return {
    project,
    name: form.name,
    flavor: form.flavor ?? '',
    image: form.image ?? '',
    size: form.size,
    user_data: '',
    queue: false,
    sla_tier: '', // the organization's default tier
    ...(form.subnet ? { subnet_id: form.subnet } : {}),
    ...(form.sshKeys.length ? { ssh_keys: form.sshKeys } : {}),
  }
}

const EMPTY: ClusterForm = { name: '', flavor: null, image: null, size: 2, subnet: null, sshKeys: [] }

/** The project's clusters (`/clusters/?project=`, refreshed every 2 s): create one (N instances of one flavor placed
 * together, all or nothing), open one. */
export function ClustersPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const qc = useQueryClient()
  const flavors = useFlavors()
  const images = useImages()
  const flavorById = byId(flavors.data)
  const imageById = byId(images.data)
  const keys = useQuery({
    queryKey: ['ssh-keys', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/ssh-keys/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const subnets = useQuery({
    queryKey: ['subnets', pid],
    queryFn: () => unwrap(api.GET('/api/v1/subnets/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const filters = useListFilters({ name_contains: '', status: null as ClusterStatus | null })
  const clusters = usePaged(['clusters', pid, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/clusters/', { params: { query: { project: pid, cursor, page_size: 20 } } })),
  { refetchInterval: 2000 })
  const [form, setForm] = useState<ClusterForm>(EMPTY)
  const bodyKey = JSON.stringify(form)
  // One Idempotency-Key per distinct request: a double click creates one cluster.
  const idempotencyKey = useMemo(() => crypto.randomUUID(), [bodyKey])
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/clusters/', {
        body: clusterBody(form, pid),
        params: { header: { 'Idempotency-Key': idempotencyKey } },
      })),
    onSuccess: () => {
      setForm(EMPTY)
      void qc.invalidateQueries({ queryKey: ['clusters'] })
    },
  })
  const submitCreate = useSubmitOnce(create)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitCreate()
  }
  const rows = clusters.data?.results ?? []

  return (
    <Stack>
      <Title order={2}>Clusters</Title>
      <Text c="dimmed">
        A cluster is N instances of one flavor placed together (all or nothing) and deleted together, for
        multi-node training.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="create-cluster">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="create-cluster">
              Create a cluster
            </Title>
            <ProblemAlert error={create.error} title="The cluster was not created"
              shownFields={['name', 'flavor', 'image', 'size', 'subnet_id', 'ssh_keys']} />
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }}>
              <TextInput label="Name" required maxLength={255} value={form.name}
                onChange={(e) => setForm({ ...form, name: e.currentTarget.value })}
                error={fieldError(create.error, 'name')} disabled={!canWrite} />
              <Select label="Flavor" required placeholder="Choose a flavor" searchable
                data={(flavors.data ?? []).map((f) => ({ value: f.id, label: `${f.name} · ${gpuLabel(f)}` }))}
                value={form.flavor} onChange={(v) => setForm({ ...form, flavor: v })} allowDeselect={false}
                error={fieldError(create.error, 'flavor')} disabled={!canWrite} />
              <NumberInput label="Size" description="Instances, 1 to 256" required min={1} max={256} value={form.size}
                onChange={(v) => setForm({ ...form, size: typeof v === 'number' ? v : Number(v) || 1 })}
                error={fieldError(create.error, 'size')} disabled={!canWrite} />
              <Select label="Image" required placeholder="Choose an image"
                data={(images.data ?? []).map((i) => ({ value: i.id, label: imageLabel(i) }))}
                value={form.image} onChange={(v) => setForm({ ...form, image: v })} allowDeselect={false}
                error={fieldError(create.error, 'image')} disabled={!canWrite} />
              <Select label="Subnet (optional)" description="Each member gets a port with a fixed IP" clearable
                data={(subnets.data?.results ?? []).map((s) => ({ value: s.id, label: `${s.name} (${s.cidr})` }))}
                value={form.subnet} onChange={(v) => setForm({ ...form, subnet: v })} allowDeselect={false}
                error={fieldError(create.error, 'subnet_id')} disabled={!canWrite} />
              <MultiSelect label="SSH keys (optional)"
                data={(keys.data?.results ?? []).map((k) => ({ value: k.id, label: k.name }))}
                value={form.sshKeys} onChange={(v) => setForm({ ...form, sshKeys: v })}
                error={fieldError(create.error, 'ssh_keys')} disabled={!canWrite} />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={create.isPending}>
                Create cluster
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      <FilterBar label="Filter clusters">
        <SearchFilter filters={filters} />
        <ChoiceFilter filters={filters} param="status" label="Filter by status" placeholder="Any status" data={CLUSTER_STATUSES} />
      </FilterBar>
      <ProblemAlert error={clusters.error} />
      {clusters.isSuccess && rows.length === 0 && !clusters.hasPrevious ? filters.active ? <NoMatch noun="clusters" filters={filters} /> : (
        <EmptyState title="No clusters yet">
          Create one above: choose a flavor and how many instances; they are placed together or not at all.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Clusters">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Flavor</Table.Th>
              <Table.Th>Image</Table.Th>
              <Table.Th>Size</Table.Th>
              <Table.Th>Created</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((c) => (
              <Table.Tr key={c.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/clusters/${c.id}`}>
                    {c.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>
                  <StatusBadge status={c.status} />
                </Table.Td>
                <Table.Td>{flavorById.get(c.flavor)?.name ?? c.flavor}</Table.Td>
                <Table.Td>{imageLabel(imageById.get(c.image))}</Table.Td>
                <Table.Td>{c.size}</Table.Td>
                <Table.Td>{new Date(c.created_at).toLocaleString()}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager pageNumber={clusters.pageNumber} hasNext={clusters.hasNext} hasPrevious={clusters.hasPrevious}
        onNext={clusters.goNext} onPrevious={clusters.goPrevious} loading={clusters.isFetching} />
    </Stack>
  )
}
