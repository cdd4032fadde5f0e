import { Anchor, Badge, Code, Group, Loader, NumberInput, Paper, Select, SimpleGrid, Stack, Table, Tabs, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useState, type FormEvent } from 'react'
import { Link, useNavigate, useParams } from 'react-router'
import { ApiError, api, unwrap, type Port, type PublicIp, type SecurityGroup, type SecurityGroupRule, type Vpc } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { EmptyState } from '../components/EmptyState'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useUrlTab } from '../hooks/useListFilters'
import { useRemove } from '../hooks/useRemove'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { NotFoundPage } from './NotFound'

/** "tcp 22", "udp 1000-2000", "icmp type 8", "any": a rule's traffic as the API stored it (canonical form). */
export function ruleTraffic(rule: Pick<SecurityGroupRule, 'protocol' | 'port_range_min' | 'port_range_max' | 'icmp_type' | 'icmp_code'>): string {
  const protocol = rule.protocol || 'any'
  if (rule.port_range_min != null) {
    const max = rule.port_range_max ?? rule.port_range_min
    return `${protocol} ${max === rule.port_range_min ? rule.port_range_min : `${rule.port_range_min}-${max}`}`
  }
  if (rule.icmp_type != null) return `${protocol} type ${rule.icmp_type}${rule.icmp_code != null ? ` code ${rule.icmp_code}` : ''}`
  return protocol === 'any' ? 'any' : `${protocol} (all)`
}

/** Where a rule lets traffic come from (ingress) or go to (egress). */
export function ruleRemote(rule: Pick<SecurityGroupRule, 'remote_ip_prefix' | 'remote_group'>, groups: Map<string, SecurityGroup>): string {
  if (rule.remote_group) return `group ${groups.get(rule.remote_group)?.name ?? rule.remote_group}`
  return rule.remote_ip_prefix || 'anywhere'
}

const MONO = { input: { fontFamily: 'monospace' } }

/** A VPC (`/vpcs/{id}/`) with its subnets, security groups (and their rules) and floating IPs, in tabs (the tab in
 * the URL, `?tab=security-groups`). */
export function VpcDetailPage() {
  const { id = '' } = useParams()
  const navigate = useNavigate()
  const qc = useQueryClient()
  const [tab, setTab] = useUrlTab(['subnets', 'security-groups', 'floating-ips'])
  const vpc = useQuery({
    queryKey: ['vpc', id],
    queryFn: () => unwrap(api.GET('/api/v1/vpcs/{id}/', { params: { path: { id } } })),
  })
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/vpcs/{id}/', { params: { path: { id } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['vpcs'] })
      navigate('/networking')
    },
  })

  if (vpc.error instanceof ApiError && vpc.error.status === 404) return <NotFoundPage what="VPC" />
  if (vpc.isPending) return <Loader role="status" aria-label="Loading the VPC" />
  if (vpc.isError) return <ProblemAlert error={vpc.error} />
  const v = vpc.data

  return (
    <Stack>
      <Anchor component={Link} to="/networking" size="sm">
        ← Networking
      </Anchor>
      <Group justify="space-between" align="center">
        <Title order={2}>{v.name}</Title>
        <ConfirmButton
          label="Delete"
          title={`Delete the VPC “${v.name}”?`}
          message="Its router and security groups go with it. A VPC that still has subnets or floating IPs is refused: remove those first."
          confirmLabel="Delete VPC"
          color="red.9"
          loading={remove.isPending}
          onConfirm={() => remove.mutate()}
        />
      </Group>
      <ProblemAlert error={remove.error} title="The VPC was not deleted" />
      <Paper withBorder p="md">
        <dl className="facts">
          <dt>IPv4 CIDR</dt>
          <dd>
            <Code>{v.cidr}</Code>
          </dd>
          <dt>IPv6 CIDR</dt>
          <dd>{v.ipv6_cidr ? <Code>{v.ipv6_cidr}</Code> : '—'}</dd>
          <dt>Description</dt>
          <dd>{v.description || '—'}</dd>
          <dt>ID</dt>
          <dd>
            <Code>{v.id}</Code>
          </dd>
        </dl>
      </Paper>
      <Tabs value={tab} onChange={setTab} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="subnets">Subnets</Tabs.Tab>
          <Tabs.Tab value="security-groups">Security groups</Tabs.Tab>
          <Tabs.Tab value="floating-ips">Floating IPs</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="subnets" pt="md">
          <Subnets vpc={v} />
        </Tabs.Panel>
        <Tabs.Panel value="security-groups" pt="md">
          <SecurityGroups vpc={v} />
        </Tabs.Panel>
        <Tabs.Panel value="floating-ips" pt="md">
          <FloatingIps vpc={v} />
        </Tabs.Panel>
      </Tabs>
    </Stack>
  )
}

function Subnets({ vpc }: { vpc: Vpc }) {
  const { canWrite } = useScope()
  const subnets = useQuery({
    queryKey: ['subnets', vpc.id],
    queryFn: () => unwrap(api.GET('/api/v1/subnets/', { params: { query: { vpc: vpc.id, page_size: 500 } } })),
  })
  const create = useCreateForm({ name: '', cidr: '', gateway: '', dns: '' }, {
    mutationFn: ({ name, cidr, gateway, dns }) => {
      const nameservers = dns.split(/[\s,]+/).filter(Boolean)
      return unwrap(api.POST('/api/v1/subnets/', {
        body: {
          vpc: vpc.id, name, cidr, enable_dhcp: true, ...(gateway ? { gateway_ip: gateway } : {}),
          ...(nameservers.length ? { dns_nameservers: nameservers } : {}),
        },
      }))
    },
    invalidate: ['subnets'],
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/subnets/{id}/', { params: { path: { id } } })), ['subnets'])

  return (
    <Stack>
      <CreateForm id="create-subnet" title="Add a subnet" error={create.error} errorTitle="The subnet was not added"
        fields={['name', 'cidr', 'gateway_ip', 'dns_nameservers']} onSubmit={create.submit} submitLabel="Add subnet"
        loading={create.mutation.isPending}>
        <SimpleGrid cols={{ base: 1, sm: 2 }}>
          <TextInput label="Name" description="Letters, digits, hyphens and underscores; no spaces" required maxLength={63}
            {...create.text('name')} disabled={!canWrite} />
          <TextInput label="CIDR" description={`Inside ${vpc.cidr}${vpc.ipv6_cidr ? ` or ${vpc.ipv6_cidr}` : ''}`} required
            {...create.text('cidr')} disabled={!canWrite} styles={MONO} />
          <TextInput label="Gateway (optional)" description="Default: the first usable address"
            {...create.text('gateway', 'gateway_ip')} disabled={!canWrite} styles={MONO} />
          <TextInput label="DNS servers (optional)" description="Up to five addresses, separated by commas"
            {...create.text('dns', 'dns_nameservers')} disabled={!canWrite} styles={MONO} />
        </SimpleGrid>
      </CreateForm>
      <ProblemAlert error={subnets.error ?? remove.error} title={remove.error ? 'The subnet was not deleted' : undefined} />
      <ResourceTable
        label="Subnets"
        rows={subnets.data?.results ?? []}
        rowKey={(subnet) => subnet.id}
        list={subnets}
        empty={{ title: 'No subnets yet', text: 'Add a subnet above: instances launched into it get an address from its range.' }}
        columns={[
          { header: 'Name', cell: (subnet) => subnet.name },
          { header: 'CIDR', cell: (subnet) => <Code>{subnet.cidr}</Code> },
          { header: 'Gateway', cell: (subnet) => <Code>{subnet.gateway_ip}</Code> },
          {
            header: 'DHCP range',
            cell: (subnet) => (subnet.enable_dhcp ? <Code>{subnet.dhcp_start} – {subnet.dhcp_end}</Code> : 'off'),
          },
          { header: 'DNS servers', cell: (subnet) => subnet.dns_nameservers.join(', ') || '—' },
        ]}
        actions={(subnet) => (
          <DeleteButton remove={remove} target={subnet.id} name={`Delete subnet ${subnet.name}`}
            title={`Delete the subnet “${subnet.name}”?`} message="A subnet that instances still use (it has ports) is refused." />
        )}
      />
    </Stack>
  )
}

const PROTOCOLS = [
  { value: 'tcp', label: 'TCP' },
  { value: 'udp', label: 'UDP' },
  { value: 'icmp', label: 'ICMP' },
  { value: 'any', label: 'Any protocol' },
]

function SecurityGroups({ vpc }: { vpc: Vpc }) {
  const { canWrite } = useScope()
  const groups = useQuery({
    queryKey: ['security-groups', vpc.id],
    queryFn: () => unwrap(api.GET('/api/v1/security-groups/', { params: { query: { vpc: vpc.id, page_size: 500 } } })),
  })
  const create = useCreateForm({ name: '', description: '' }, {
    mutationFn: (v) => unwrap(api.POST('/api/v1/security-groups/', { body: { vpc: vpc.id, ...v } })),
    invalidate: ['security-groups'],
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/security-groups/{id}/', { params: { path: { id } } })),
    ['security-groups'])
  const list = groups.data?.results ?? []
  const byId = new Map(list.map((g) => [g.id, g]))

  return (
    <Stack>
      <Text c="dimmed">
        Stateful allow rules: a port gets only the traffic some rule of its groups allows (replies included). The
        default group allows all egress and traffic from members of the same group.
      </Text>
      <ProblemAlert error={groups.error ?? remove.error} title={remove.error ? 'The security group was not deleted' : undefined} />
      {groups.isPending && <Loader role="status" size="sm" aria-label="Loading the security groups" />}
      {list.map((group) => (
        <Paper key={group.id} withBorder p="md" component="section" aria-label={`Security group ${group.name}`} data-testid={`sg-${group.name}`}>
          <Stack gap="sm">
            <Group justify="space-between">
              <Group gap="xs">
                <Title order={3} size="h4">
                  {group.name}
                </Title>
                {group.is_default && (
                  <Badge color="gray.7" variant="filled">
                    default
                  </Badge>
                )}
              </Group>
              {!group.is_default && (
                <DeleteButton remove={remove} target={group.id} label="Delete group" name={`Delete group ${group.name}`}
                  title={`Delete the security group “${group.name}”?`}
                  message="A group that ports still use, or that another group's rule names, is refused." />
              )}
            </Group>
            {group.description && <Text size="sm">{group.description}</Text>}
            <Rules group={group} groups={byId} />
          </Stack>
        </Paper>
      ))}
      <CreateForm id="create-sg" title="Create a security group" error={create.error}
        errorTitle="The security group was not created" fields={['name', 'description']} onSubmit={create.submit}
        submitLabel="Create security group" loading={create.mutation.isPending}>
        <SimpleGrid cols={{ base: 1, sm: 2 }}>
          <TextInput label="Name" description="Letters, digits, hyphens and underscores; no spaces" required maxLength={63}
            {...create.text('name')} disabled={!canWrite} />
          <TextInput label="Description (optional)" description="Shown with the group" maxLength={200}
            {...create.text('description')} disabled={!canWrite} />
        </SimpleGrid>
      </CreateForm>
    </Stack>
  )
}

function Rules({ group, groups }: { group: SecurityGroup; groups: Map<string, SecurityGroup> }) {
  const { canWrite } = useScope()
  const qc = useQueryClient()
  const [direction, setDirection] = useState<'ingress' | 'egress'>('ingress')
  const [ethertype, setEthertype] = useState<'IPv4' | 'IPv6'>('IPv4')
  const [protocol, setProtocol] = useState('tcp')
  const [portMin, setPortMin] = useState<number | string>('')
  const [portMax, setPortMax] = useState<number | string>('')
  const [remote, setRemote] = useState('')
  const ports = protocol === 'tcp' || protocol === 'udp'
  const add = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/security-group-rules/', {
        body: {
          security_group: group.id, direction, ethertype, protocol,
          ...(ports && portMin !== '' ? { port_range_min: Number(portMin), port_range_max: Number(portMax === '' ? portMin : portMax) } : {}),
          ...(remote ? { remote_ip_prefix: remote } : {}),
        },
      })),
    onSuccess: () => {
      setPortMin('')
      setPortMax('')
      setRemote('')
      void qc.invalidateQueries({ queryKey: ['security-groups'] })
    },
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/security-group-rules/{id}/', { params: { path: { id } } })),
    ['security-groups'])
  const submitAdd = useSubmitOnce(add)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitAdd()
  }
  const label = (field: string) => `${field} (${group.name})`

  return (
    <>
      {group.rules.length === 0 ? (
        <Text size="sm" c="dimmed">
          No rules: ports in this group get no traffic from it.
        </Text>
      ) : (
        <Table striped aria-label={`Rules of ${group.name}`}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Direction</Table.Th>
              <Table.Th>Ether type</Table.Th>
              <Table.Th>Traffic</Table.Th>
              <Table.Th>Remote</Table.Th>
              <Table.Th>Description</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {group.rules.map((rule) => (
              <Table.Tr key={rule.id} data-testid="rule">
                <Table.Td>{rule.direction}</Table.Td>
                <Table.Td>{rule.ethertype}</Table.Td>
                <Table.Td>{ruleTraffic(rule)}</Table.Td>
                <Table.Td>{ruleRemote(rule, groups)}</Table.Td>
                <Table.Td>{rule.description || '—'}</Table.Td>
                <Table.Td ta="right">
                  <DeleteButton remove={remove} target={rule.id} label="Remove"
                    name={`Remove rule ${rule.direction} ${ruleTraffic(rule)} from ${group.name}`} title="Remove this rule?"
                    message={`${rule.direction} ${ruleTraffic(rule)} ${rule.direction === 'ingress' ? 'from' : 'to'} ${ruleRemote(rule, groups)} is no longer allowed for the group's ports.`} />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <ProblemAlert error={remove.error} title="The rule was not removed" />
      <form onSubmit={submit} noValidate aria-label={`Add a rule to ${group.name}`}>
        <Stack gap="xs">
          <ProblemAlert error={add.error} title="The rule was not added"
            shownFields={['direction', 'ethertype', 'protocol', 'port_range_min', 'port_range_max', 'remote_ip_prefix']} />
          <Group align="flex-start" gap="sm" wrap="wrap">
            <Select label="Direction" aria-label={label('Direction')} w={120} data={['ingress', 'egress']} value={direction}
              onChange={(v) => v && setDirection(v as 'ingress' | 'egress')} allowDeselect={false} disabled={!canWrite}
              error={fieldError(add.error, 'direction')} />
            <Select label="Ether type" aria-label={label('Ether type')} w={110} data={['IPv4', 'IPv6']} value={ethertype}
              onChange={(v) => v && setEthertype(v as 'IPv4' | 'IPv6')} allowDeselect={false} disabled={!canWrite}
              error={fieldError(add.error, 'ethertype')} />
            <Select label="Protocol" aria-label={label('Protocol')} w={150} data={PROTOCOLS} value={protocol}
              onChange={(v) => v && setProtocol(v)} allowDeselect={false} disabled={!canWrite}
              error={fieldError(add.error, 'protocol')} />
            <NumberInput label="From port" aria-label={label('From port')} w={110} min={1} max={65535} value={portMin}
              onChange={setPortMin} disabled={!canWrite || !ports} placeholder={ports ? 'all' : '—'}
              error={fieldError(add.error, 'port_range_min')} />
            <NumberInput label="To port" aria-label={label('To port')} w={110} min={1} max={65535} value={portMax}
              onChange={setPortMax} disabled={!canWrite || !ports} placeholder={ports ? 'same' : '—'}
              error={fieldError(add.error, 'port_range_max')} />
            <TextInput label="Remote prefix" aria-label={label('Remote prefix')} w={180} placeholder="anywhere" value={remote}
              onChange={(e) => setRemote(e.currentTarget.value)} disabled={!canWrite}
              error={fieldError(add.error, 'remote_ip_prefix')} styles={{ input: { fontFamily: 'monospace' } }} />
            <WriteButton type="submit" mt={25} variant="default" loading={add.isPending} aria-label={`Add rule to ${group.name}`}>
              Add rule
            </WriteButton>
          </Group>
        </Stack>
      </form>
    </>
  )
}

/** "10.0.0.5 · notebook": a port of the VPC as the association menu shows it. */
export function portLabel(port: Port, instanceNames: Map<string, string>): string {
  const ips = port.fixed_ips.map((ip) => ip.ip_address).join(', ')
  const owner = port.instance_id ? (instanceNames.get(port.instance_id) ?? 'instance') : port.name || 'unbound port'
  return `${ips || port.mac_address} · ${owner}`
}

function FloatingIps({ vpc }: { vpc: Vpc }) {
  const { project, canWrite } = useScope()
  const qc = useQueryClient()
  const pid = project?.id ?? ''
  const ips = useQuery({
    queryKey: ['public-ips', vpc.id],
    queryFn: () => unwrap(api.GET('/api/v1/public-ips/', { params: { query: { vpc: vpc.id, page_size: 500 } } })),
  })
  const pools = useQuery({
    queryKey: ['public-ip-pools'],
    queryFn: () => unwrap(api.GET('/api/v1/public-ip-pools/', { params: { query: { page_size: 500 } } })),
    staleTime: 5 * 60_000,
  })
  const ports = useQuery({
    queryKey: ['ports', vpc.id],
    queryFn: () => unwrap(api.GET('/api/v1/ports/', { params: { query: { vpc: vpc.id, page_size: 500 } } })),
  })
  const instances = useQuery({
    queryKey: ['instances', pid, 'names'],
    queryFn: () => unwrap(api.GET('/api/v1/instances/', { params: { query: { project: pid, page_size: 500 } } })),
    staleTime: 30_000,
  })
  const names = new Map((instances.data?.results ?? []).map((i) => [i.id, i.name]))
  const portOptions = (ports.data?.results ?? []).map((p) => ({ value: p.id, label: portLabel(p, names) }))
  const [pool, setPool] = useState<string | null>(null)
  const [port, setPort] = useState<string | null>(null)
  const allocate = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/public-ips/', { body: { vpc: vpc.id, pool: pool ?? '', ...(port ? { port } : {}) } })),
    onSuccess: () => {
      setPort(null)
      void qc.invalidateQueries({ queryKey: ['public-ips'] })
    },
  })
  const associate = useMutation({
    mutationFn: ({ id, port }: { id: string; port: string | null }) =>
      unwrap(api.PATCH('/api/v1/public-ips/{id}/', { params: { path: { id } }, body: { port } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['public-ips'] }),
  })
  const release = useRemove((id: string) => unwrap(api.DELETE('/api/v1/public-ips/{id}/', { params: { path: { id } } })), ['public-ips'])
  const submitAllocate = useSubmitOnce(allocate)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitAllocate()
  }
  const poolOptions = (pools.data?.results ?? []).map((p) => ({ value: p.name, label: `${p.name} (${p.cidr})` }))
  const rows: PublicIp[] = ips.data?.results ?? []

  return (
    <Stack>
      <Paper withBorder p="md" component="section" aria-labelledby="allocate-ip">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="allocate-ip">
              Allocate a floating IP
            </Title>
            <Text size="sm" c="dimmed">
              A public address from the provider’s pool, NATed on the VPC’s router to one port (billed per hour while
              allocated).
            </Text>
            <ProblemAlert error={allocate.error} title="No floating IP was allocated" shownFields={['pool', 'port']} />
            <SimpleGrid cols={{ base: 1, sm: 2 }}>
              <Select label="Pool" required placeholder={poolOptions.length ? 'Choose a pool' : 'No pool offered'}
                data={poolOptions} value={pool} onChange={setPool} disabled={!canWrite}
                error={fieldError(allocate.error, 'pool')} />
              <Select label="Associate with (optional)" placeholder={portOptions.length ? 'Not associated' : 'No instance ports in this VPC'}
                data={portOptions} value={port} onChange={setPort} clearable disabled={!canWrite || portOptions.length === 0}
                error={fieldError(allocate.error, 'port')} />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={allocate.isPending} disabled={!pool}>
                Allocate
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={ips.error ?? associate.error ?? release.error}
        title={associate.error ? 'The association was not changed' : release.error ? 'The floating IP was not released' : undefined} />
      {ips.isSuccess && rows.length === 0 ? (
        <EmptyState title="No floating IPs">Allocate one above to reach an instance of this VPC from the internet.</EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Floating IPs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Address</Table.Th>
              <Table.Th>Kind</Table.Th>
              <Table.Th>Associated with</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((ip) => (
              <Table.Tr key={ip.id}>
                <Table.Td>
                  <Code>{ip.address}</Code>
                </Table.Td>
                <Table.Td>{ip.kind === 'router_gateway' ? 'router (SNAT)' : 'floating'}</Table.Td>
                <Table.Td>
                  {ip.kind === 'floating' ? (
                    <Select aria-label={`Port of ${ip.address}`} size="xs" w={260} placeholder="Not associated" clearable
                      data={portOptions} value={ip.port} disabled={!canWrite || associate.isPending}
                      onChange={(value) => associate.mutate({ id: ip.id, port: value })} />
                  ) : (
                    'the VPC’s outbound traffic'
                  )}
                </Table.Td>
                <Table.Td ta="right">
                  {ip.kind === 'floating' && (
                    <DeleteButton remove={release} target={ip.id} label="Release" name={`Release ${ip.address}`}
                      title={`Release ${ip.address}?`}
                      message="The address goes back to the pool and its NAT is removed; you may not get the same address again." />
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  )
}
