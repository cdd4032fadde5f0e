import { Anchor, Code, Group, Paper, SimpleGrid, Stack, Table, Tabs, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { Link } from 'react-router'
import { api, unwrap } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { usePaged } from '../hooks/usePaged'
import { IbPartitionsPanel } from './IbPartitions'

/** The Networking screen: the project's VPCs and, on a second tab, its InfiniBand partitions. */
export function NetworkingPage() {
  return (
    <Stack>
      <Title order={2}>Networking</Title>
      <Tabs defaultValue="vpcs" keepMounted={false}>
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

/** The project's VPCs (`/vpcs/`): create one (name, IPv4 CIDR, optional IPv6 CIDR), open or delete it. */
export function VpcsPanel() {
  const { project, canWrite } = useScope()
  const qc = useQueryClient()
  const pid = project?.id ?? ''
  const vpcs = usePaged(['vpcs', pid], (cursor) =>
    unwrap(api.GET('/api/v1/vpcs/', { params: { query: { project: pid, cursor, page_size: 50 } } })),
  )
  const [name, setName] = useState('')
  const [cidr, setCidr] = useState('')
  const [ipv6, setIpv6] = useState('')
  const [description, setDescription] = useState('')
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/vpcs/', {
        body: { project: pid, name, cidr, description, ...(ipv6 ? { ipv6_cidr: ipv6 } : {}) },
      })),
    onSuccess: () => {
      setName('')
      setCidr('')
      setIpv6('')
      setDescription('')
      void qc.invalidateQueries({ queryKey: ['vpcs'] })
    },
  })
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/v1/vpcs/{id}/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['vpcs'] }),
  })
  const submit = (event: FormEvent) => {
    event.preventDefault()
    create.mutate()
  }
  const rows = vpcs.data?.results ?? []

  return (
    <Stack>
      <Text c="dimmed">
        VPCs are the project’s private networks: each has one router, its subnets, security groups and floating IPs.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="create-vpc">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="create-vpc">
              Create a VPC
            </Title>
            <ProblemAlert error={create.error} title="The VPC was not created" shownFields={['name', 'cidr', 'ipv6_cidr', 'description']} />
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <TextInput
                label="Name"
                description="Lower-case letters, digits and hyphens"
                required
                maxLength={63}
                value={name}
                onChange={(e) => setName(e.currentTarget.value)}
                error={fieldError(create.error, 'name')}
                disabled={!canWrite}
              />
              <TextInput
                label="IPv4 CIDR"
                description="A private range, e.g. 10.20.0.0/16"
                required
                value={cidr}
                onChange={(e) => setCidr(e.currentTarget.value)}
                error={fieldError(create.error, 'cidr')}
                disabled={!canWrite}
                styles={{ input: { fontFamily: 'monospace' } }}
              />
              <TextInput
                label="IPv6 CIDR (optional)"
                description="Inside fc00::/7, e.g. fd00:20::/48"
                value={ipv6}
                onChange={(e) => setIpv6(e.currentTarget.value)}
                error={fieldError(create.error, 'ipv6_cidr')}
                disabled={!canWrite}
                styles={{ input: { fontFamily: 'monospace' } }}
              />
              <TextInput
                label="Description (optional)"
                maxLength={200}
                value={description}
                onChange={(e) => setDescription(e.currentTarget.value)}
                error={fieldError(create.error, 'description')}
                disabled={!canWrite}
              />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={create.isPending}>
                Create VPC
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={vpcs.error ?? remove.error} title={remove.error ? 'The VPC was not deleted' : undefined} />
      {vpcs.isSuccess && rows.length === 0 && !vpcs.hasPrevious ? (
        <EmptyState title="No VPCs yet">
          Create a VPC above, then add a subnet to it: instances get their addresses from a subnet you choose when you
          launch them.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="VPCs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>IPv4 CIDR</Table.Th>
              <Table.Th>IPv6 CIDR</Table.Th>
              <Table.Th>Description</Table.Th>
              <Table.Th>Created</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((vpc) => (
              <Table.Tr key={vpc.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/networking/vpcs/${vpc.id}`}>
                    {vpc.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>
                  <Code>{vpc.cidr}</Code>
                </Table.Td>
                <Table.Td>{vpc.ipv6_cidr ? <Code>{vpc.ipv6_cidr}</Code> : '—'}</Table.Td>
                <Table.Td>{vpc.description || '—'}</Table.Td>
                <Table.Td>{new Date(vpc.created_at).toLocaleString()}</Table.Td>
                <Table.Td ta="right">
                  <ConfirmButton
                    label="Delete"
                    aria-label={`Delete VPC ${vpc.name}`}
                    title={`Delete the VPC “${vpc.name}”?`}
                    message="Its router and security groups go with it. A VPC that still has subnets or floating IPs is refused: remove those first."
                    color="red.9"
                    variant="outline"
                    size="xs"
                    loading={remove.isPending && remove.variables === vpc.id}
                    onConfirm={() => remove.mutate(vpc.id)}
                  />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={vpcs.pageNumber}
        hasNext={vpcs.hasNext}
        hasPrevious={vpcs.hasPrevious}
        onNext={vpcs.goNext}
        onPrevious={vpcs.goPrevious}
        loading={vpcs.isFetching}
      />
    </Stack>
  )
}
