import { Anchor, Code, SimpleGrid, Stack, Tabs, Text, TextInput, Title } from '@mantine/core'
import { Link } from 'react-router'
import { api, unwrap } from '../api/client'
import { useScope } from '../auth/scope'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { FilterBar, SearchFilter } from '../components/ListFilters'
import { ProblemAlert } from '../components/ProblemAlert'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters, useUrlTab } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { useRemove } from '../hooks/useRemove'
import { IbPartitionsPanel } from './IbPartitions'

/** The Networking screen: the project's VPCs and, on a second tab, its InfiniBand partitions (the tab in the URL,
 * `?tab=ib-partitions`). */
export function NetworkingPage() {
  const [tab, setTab] = useUrlTab(['vpcs', 'ib-partitions'])
  return (
    <Stack>
      <Title order={2}>Networking</Title>
      <Tabs value={tab} onChange={setTab} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="vpcs">VPCs</Tabs.Tab>
          <Tabs.Tab value="ib-partitions">InfiniBand partitions</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="vpcs" pt="md">
          <VpcsPanel />
        </Tabs.Panel>
        <Tabs.Panel value="ib-partitions" pt="md">
          <IbPartitionsPanel />
        </Tabs.Panel>
      </Tabs>
    </Stack>
  )
}

/** The project's VPCs (`/vpcs/`): create one (name, IPv4 CIDR, optional IPv6 CIDR), open or delete it; search
 * them by name. */
export function VpcsPanel() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const filters = useListFilters({ name_contains: '' })
  const vpcs = usePaged(['vpcs', pid, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/vpcs/', { params: { query: { project: pid, ...filters.query, cursor, page_size: 50 } } })),
  )
  const create = useCreateForm({ name: '', cidr: '', ipv6_cidr: '', description: '' }, {
    mutationFn: ({ ipv6_cidr, ...v }) =>
      unwrap(api.POST('/api/v1/vpcs/', { body: { project: pid, ...v, ...(ipv6_cidr ? { ipv6_cidr } : {}) } })),
    invalidate: ['vpcs'],
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/vpcs/{id}/', { params: { path: { id } } })), ['vpcs'])
  const mono = { input: { fontFamily: 'monospace' } }

  return (
    <Stack>
      <Text c="dimmed">
        VPCs are the project’s private networks: each has one router, its subnets, security groups and floating IPs.
      </Text>
      <CreateForm id="create-vpc" title="Create a VPC" error={create.error} errorTitle="The VPC was not created"
        fields={['name', 'cidr', 'ipv6_cidr', 'description']} onSubmit={create.submit} submitLabel="Create VPC"
        loading={create.mutation.isPending}>
        <SimpleGrid cols={{ base: 1, sm: 2 }}>
          <TextInput label="Name" description="Letters, digits, hyphens and underscores; no spaces" required maxLength={63}
            {...create.text('name')} disabled={!canWrite} />
          <TextInput label="IPv4 CIDR" description="A private range, e.g. 10.20.0.0/16" required {...create.text('cidr')}
            disabled={!canWrite} styles={mono} />
          <TextInput label="IPv6 CIDR (optional)" description="Inside fc00::/7, e.g. fd00:20::/48" {...create.text('ipv6_cidr')}
            disabled={!canWrite} styles={mono} />
          <TextInput label="Description (optional)" maxLength={200} {...create.text('description')} disabled={!canWrite} />
        </SimpleGrid>
      </CreateForm>
      <FilterBar label="Filter VPCs">
        <SearchFilter filters={filters} />
      </FilterBar>
      <ProblemAlert error={vpcs.error ?? remove.error} title={remove.error ? 'The VPC was not deleted' : undefined} />
      <ResourceTable
        label="VPCs"
        rows={vpcs.data?.results ?? []}
        rowKey={(vpc) => vpc.id}
        list={vpcs}
        filters={filters}
        empty={{
          title: 'No VPCs yet',
          text: 'Create a VPC above, then add a subnet to it: instances get their addresses from a subnet you choose when you launch them.',
        }}
        columns={[
          { header: 'Name', cell: (vpc) => <Anchor component={Link} to={`/networking/vpcs/${vpc.id}`}>{vpc.name}</Anchor> },
          { header: 'IPv4 CIDR', cell: (vpc) => <Code>{vpc.cidr}</Code> },
          { header: 'IPv6 CIDR', cell: (vpc) => (vpc.ipv6_cidr ? <Code>{vpc.ipv6_cidr}</Code> : '—') },
          { header: 'Description', cell: (vpc) => vpc.description || '—' },
          { header: 'Created', cell: (vpc) => new Date(vpc.created_at).toLocaleString() },
        ]}
        actions={(vpc) => (
          <DeleteButton remove={remove} target={vpc.id} name={`Delete VPC ${vpc.name}`} title={`Delete the VPC “${vpc.name}”?`}
            message="Its router and security groups go with it. A VPC that still has subnets or floating IPs is refused: remove those first." />
        )}
      />
    </Stack>
  )
}
