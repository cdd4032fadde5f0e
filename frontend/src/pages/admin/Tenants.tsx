import { Badge, Button, Grid, Group, Modal, NumberInput, Paper, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type Organization, type Project, type Schemas } from '../../api/client'
import { useMe } from '../../auth/staff'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { WriteButton } from '../../components/WriteButton'
import { money, useInvoicePreview } from '../../hooks/billing'
import { QUALIFIABLE, QUOTA_RESOURCES, quotaAmount, quotaLabel } from '../../quota'
import { NotFoundPage } from '../NotFound'
import { durationText } from './Incidents'

type Quota = Schemas['QuotaOutput']
type SlaReport = Schemas['SlaReportOutput']
type Preview = Schemas['InvoicePreviewOutput']

/** "$1,234.50 to date, 3 resources billed for 96 h" — the organization's month so far (the invoice preview). */
export function spendText(p: Pick<Preview, 'total' | 'currency' | 'lines'>): string {
  const usage = p.lines.filter((l) => l.kind === 'usage')
  const hours = usage.reduce((sum, l) => sum + Number(l.billed_seconds ?? 0), 0) / 3600
  const resources = new Set(usage.map((l) => `${l.resource_type}:${l.resource_id}`)).size
  return `${money(p.total, p.currency)} to date, ${resources} resource${resources === 1 ? '' : 's'} billed for ${Math.round(hours * 10) / 10} h`
}

/** The SLA standing from the organization's SLA reports (each a resource-month with provider-caused downtime):
 * "met" when none (under the organization's default tier), else the worst uptime against its target and the credits
 * earned, under the tier of that report's resource (a resource may run on another tier than the default). */
export function slaStanding(tier: string, reports: SlaReport[]): { met: boolean; text: string } {
  if (!reports.length) return { met: true, text: `${tier || 'no'} tier: met (no provider-caused downtime on record)` }
  const worst = reports.reduce((a, b) => (Number(b.uptime_pct) < Number(a.uptime_pct) ? b : a))
  const credits = new Map<string, number>()
  for (const r of reports) credits.set(r.currency, (credits.get(r.currency) ?? 0) + Number(r.credit_amount))
  const breached = reports.filter((r) => Number(r.credit_pct) > 0)
  const credited = [...credits].map(([c, v]) => money(v.toFixed(2), c)).join(', ')
  return {
    met: !breached.length,
    text: `${worst.sla_tier || tier || 'no'} tier: ${breached.length ? `missed for ${breached.length} resource-month${breached.length === 1 ? '' : 's'}` : 'met'}; `
      + `lowest uptime ${Number(worst.uptime_pct).toFixed(3)} % in ${worst.period} (target ${Number(worst.target_uptime_pct)} %); credits ${credited}`,
  }
}

/** The organization's month: spend to date (GET /invoices/preview/), its SLA standing (GET /sla-reports/) and the
 * open incidents that hit its resources (the open incidents' impacts, GET /incidents/{id}/impact/). */
function TenantMonth({ org }: { org: Organization }) {
  const preview = useInvoicePreview(org.id)
  const sla = useQuery({
    queryKey: ['staff-sla-reports', org.id],
    queryFn: () => unwrap(api.GET('/api/v1/sla-reports/', { params: { query: { organization: org.id, page_size: 100 } } })),
  })
  const open = useQuery({
    queryKey: ['incidents', 'open'],
    queryFn: () => unwrap(api.GET('/api/v1/incidents/', { params: { query: { open: true, page_size: 100 } } })),
  })
  const impacts = useQueries({
    queries: (open.data?.results ?? []).map((i) => ({
      queryKey: ['incident-impact', i.id, i.end, i.start, i.provider_at_fault],
      queryFn: () => unwrap(api.GET('/api/v1/incidents/{id}/impact/', { params: { path: { id: i.id } } })),
    })),
  })
  const hitting = (open.data?.results ?? []).flatMap((i, k) => {
    const mine = impacts[k]?.data?.resources.filter((r) => r.organization === org.id) ?? []
    return mine.length ? [{ incident: i, resources: mine }] : []
  })
  const standing = sla.data ? slaStanding(org.default_sla_tier ?? '', sla.data.results) : null
  const impactsIn = open.data !== undefined && impacts.every((q) => !q.isPending)
  return (
    <>
      <Title order={4} size="h5">This month</Title>
      <dl className="facts">
        <dt>Spend</dt>
        <dd data-testid="tenant-spend">{preview.data ? spendText(preview.data) : preview.isError ? 'not available' : '…'}</dd>
        <dt>SLA</dt>
        <dd data-testid="tenant-sla">
          {standing ? <Badge mr={6} variant="filled" color={standing.met ? 'teal.9' : 'red.9'}>{standing.met ? 'met' : 'missed'}</Badge> : null}
          {standing ? standing.text : '…'}
        </dd>
        <dt>Open incidents</dt>
        <dd data-testid="tenant-incidents">
          {!impactsIn ? '…' : hitting.length ? hitting.map(({ incident, resources }) => (
            <div key={incident.id}>
              {incident.host}{incident.gpu_index !== null && incident.gpu_index !== undefined ? ` GPU ${incident.gpu_index}` : ''}: {incident.reason}
              {' '}({resources.length} resource{resources.length === 1 ? '' : 's'} down {durationText(resources.reduce((s, r) => s + r.downtime_s, 0))} so far)
            </div>
          )) : 'none'}
        </dd>
      </dl>
    </>
  )
}

/** Organizations whose name or slug contains `q` (case-insensitive), in the server's order. */
export function matchOrganizations(orgs: Organization[], q: string): Organization[] {
  const s = q.trim().toLowerCase()
  return s ? orgs.filter((o) => o.name.toLowerCase().includes(s) || o.slug.toLowerCase().includes(s)) : orgs
}

/** "12 of 64 (19 %)", "not counted" — a quota's use beside its limit, in the resource's unit when it has one
 * ("64 GiB of 512 GiB (13 %)" for `memory_mib`). */
export function quotaUseText(q: Pick<Quota, 'usage' | 'limit'> & { resource?: string }): string {
  if (q.usage === null || q.usage === undefined) return 'not counted'
  const amount = (n: number) => (q.resource ? quotaAmount(q.resource, n) : String(n))
  if (!q.limit) return `${amount(q.usage)} of ${amount(0)}`
  return `${amount(q.usage)} of ${amount(q.limit)} (${Math.round((100 * q.usage) / q.limit)} %)`
}

/** What a limit of `resource` counts, under the limit field: its unit where the API's is not a plain count. */
function limitUnit(resource: string): string | undefined {
  const base = resource.split(':')[0]
  if (base === 'memory_mib') return 'In MiB (1 GiB = 1,024 MiB).'
  if (base === 'volume_gib') return 'In GiB.'
  return undefined
}

/** Change one quota's limit (PATCH /quotas/{id}/, audited as quota.update); the API's refusal is shown on the
 * field it names. A limit below the current use is allowed: it blocks new requests only. */
const QUOTA_HINT = 'Only operators change quotas; your staff role reads them.'

/** A whole number typed into a limit field, or the reason it is not one (a NumberInput that drops
 * the decimal point would silently turn "1.5" into 15). */
export function limitProblem(value: string | number): string | undefined {
  if (value === '' || value === null) return 'Enter a limit.'
  const n = Number(value)
  if (!Number.isFinite(n) || !Number.isInteger(n)) return `A limit is a whole number (${value} is not).`
  return undefined   // the rest (a negative limit, one above the organization's) is the server's to refuse
}

/** A limit field's value and its own refusal (`limitProblem`): `submit(send)` sends only a whole number. */
function useLimitField(initial: string | number) {
  const [value, setValue] = useState<string | number>(initial)
  const [problem, setProblem] = useState<string | undefined>()
  return {
    value,
    problem,
    set: (v: string | number) => { setValue(v); setProblem(undefined) },
    submit: (send: () => void) => (e: FormEvent) => {
      e.preventDefault()
      const found = limitProblem(value)
      setProblem(found)
      if (!found) send()
    },
  }
}

function EditQuota({ quota, scope }: { quota: Quota; scope: string }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const limit = useLimitField(quota.limit)
  const save = useMutation({
    mutationFn: () =>
      unwrap(api.PATCH('/api/v1/quotas/{id}/', { params: { path: { id: quota.id } }, body: { limit: Number(limit.value) } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['staff-quotas', quota.organization] })
      setOpened(false)
    },
  })
  return (
    <>
      <WriteButton size="xs" variant="default" allowed={(quota.allowed_actions ?? []).includes('update')}
        deniedHint={QUOTA_HINT} onClick={() => { limit.set(quota.limit); save.reset(); setOpened(true) }}
        aria-label={`Change the ${quotaLabel(quota.resource)} quota of ${scope}`}>
        Change
      </WriteButton>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`${quotaLabel(quota.resource)} quota of ${scope}`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={limit.submit(() => save.mutate())} noValidate>
          <Stack>
            <Text size="sm">
              In use now: {quota.usage === null || quota.usage === undefined ? 'not counted' : quotaAmount(quota.resource, quota.usage)}.
              A limit below that blocks new requests only.
            </Text>
            <NumberInput label="Limit" value={limit.value} onChange={limit.set} required data-autofocus
              description={limitUnit(quota.resource)}
              error={limit.problem ?? fieldError(save.error, 'limit')} />
            {/* a refusal of the limit is shown on the field; the alert is for any other */}
            {!fieldError(save.error, 'limit') && <ProblemAlert error={save.error} shownFields={['limit']} />}
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" loading={save.isPending}>Save limit</Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** Set a new organization-level limit (POST /quotas/): a resource chosen by its name ("GPUs", "vCPUs"), with a
 * qualifier where it takes one (a GPU model: `gpus:H100-SXM5-80GB`). */
const QUALIFIER_LABELS: Record<string, string> = {
  gpus: 'GPU model', mig_slices: 'MIG profile', vgpus: 'vGPU type', volume_gib: 'Volume type',
}

function AddQuota({ org, allowed }: { org: Organization; allowed: boolean }) {
  const qc = useQueryClient()
  const [base, setBase] = useState<string | null>(null)
  const [qualifier, setQualifier] = useState('')
  const resource = base ? (qualifier.trim() && QUALIFIABLE.has(base) ? `${base}:${qualifier.trim()}` : base) : ''
  const limit = useLimitField('')
  const add = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/quotas/', { body: { organization: org.id, resource, limit: Number(limit.value) } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['staff-quotas', org.id] })
      setBase(null)
      setQualifier('')
      limit.set('')
    },
  })
  return (
    <form onSubmit={limit.submit(() => add.mutate())} noValidate>
      <Group align="flex-end">
        <Select label="Resource" placeholder="Choose" value={base} w={200} disabled={!allowed} searchable
          data={QUOTA_RESOURCES.map((r) => ({ value: r, label: quotaLabel(r) }))}
          onChange={(v) => { setBase(v); if (!v || !QUALIFIABLE.has(v)) setQualifier('') }}
          error={fieldError(add.error, 'resource')} />
        <TextInput label={QUALIFIER_LABELS[base ?? ''] ?? 'Of one kind'} description="Optional: empty limits them all"
          placeholder={base === 'gpus' ? 'H100-SXM5-80GB' : undefined} value={qualifier} w={200} disabled={!allowed || !base || !QUALIFIABLE.has(base)}
          onChange={(e) => setQualifier(e.currentTarget.value)} />
        <NumberInput label="New limit" value={limit.value} onChange={limit.set} w={140} description={base ? limitUnit(base) : undefined}
          disabled={!allowed} error={limit.problem ?? fieldError(add.error, 'limit')} />
        <WriteButton type="submit" variant="default" loading={add.isPending} allowed={allowed} deniedHint={QUOTA_HINT}
          disabled={!resource.trim() || limit.value === ''}>
          Add quota
        </WriteButton>
      </Group>
      <ProblemAlert error={add.error} shownFields={['resource', 'limit']} />
    </form>
  )
}

function OrganizationPanel({ org }: { org: Organization }) {
  const me = useMe()
  const projects = useQuery({
    queryKey: ['staff-projects', org.id],
    queryFn: () => unwrap(api.GET('/api/v1/projects/', { params: { query: { organization: org.id, page_size: 500 } } })),
  })
  const quotas = useQuery({
    queryKey: ['staff-quotas', org.id],
    queryFn: () => unwrap(api.GET('/api/v1/quotas/', { params: { query: { organization: org.id, page_size: 500 } } })),
  })
  const projectName = (id: string | null | undefined) =>
    (projects.data?.results ?? []).find((p: Project) => p.id === id)?.name ?? 'a project'
  return (
    <Paper withBorder p="md" radius="md" component="section" aria-label={`Organization ${org.name}`} data-testid="tenant-panel">
      <Stack>
        <Group justify="space-between">
          <Title order={3} size="h4">{org.name}</Title>
          <Badge variant="filled" color="gray.8">{org.plan || 'no plan'}</Badge>
        </Group>
        <dl className="facts">
          <dt>Slug</dt><dd>{org.slug}</dd>
          <dt>Currency</dt><dd>{org.currency}</dd>
          <dt>SLA tier</dt><dd>{org.default_sla_tier || '—'}</dd>
          <dt>Projects</dt>
          <dd data-testid="tenant-projects">
            {projects.data ? projects.data.results.map((p: Project) => p.name).join(', ') || 'none' : '…'}
          </dd>
        </dl>
        <TenantMonth org={org} />
        <Title order={4} size="h5">Quotas</Title>
        {me.data && me.data.staff_role !== 'operator' && (
          <Text size="sm" c="dimmed" data-testid="quota-read-only">{QUOTA_HINT}</Text>
        )}
        {quotas.isError && <ProblemAlert error={quotas.error} />}
        <Table withTableBorder data-testid="tenant-quotas">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Scope</Table.Th>
              <Table.Th>Resource</Table.Th>
              <Table.Th>In use of limit</Table.Th>
              <Table.Th><span className="visually-hidden">Actions</span></Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {(quotas.data?.results ?? []).map((q: Quota) => {
              const scope = q.project ? projectName(q.project) : org.name
              return (
                <Table.Tr key={q.id} data-testid="quota-row" data-resource={q.resource} data-scope={q.scope}>
                  <Table.Td>{q.project ? `project ${scope}` : 'organization'}</Table.Td>
                  <Table.Td>{quotaLabel(q.resource)}</Table.Td>
                  <Table.Td data-testid="quota-use">{quotaUseText(q)}</Table.Td>
                  <Table.Td><EditQuota quota={q} scope={scope} /></Table.Td>
                </Table.Tr>
              )
            })}
            {quotas.data && !quotas.data.results.length && (
              <Table.Tr><Table.Td colSpan={4}><Text size="sm" c="dimmed">No quota set: the plan's defaults apply.</Text></Table.Td></Table.Tr>
            )}
          </Table.Tbody>
        </Table>
        <AddQuota org={org} allowed={me.data?.staff_role === 'operator'} />
      </Stack>
    </Paper>
  )
}

/** `/staff/tenants`: every organization (staff see all), and for the chosen one its projects and quotas with the
 * current use beside each limit; staff change a limit or add one. */
export function AdminTenantsPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  const orgs = useQuery({
    queryKey: ['staff-organizations'], enabled: staff,
    queryFn: () => unwrap(api.GET('/api/v1/organizations/', { params: { query: { page_size: 500 } } })),
  })
  const [q, setQ] = useState('')
  const [chosen, setChosen] = useState<string | null>(null)
  if (me.isPending) return null
  if (!staff) return <NotFoundPage />
  const all = orgs.data?.results ?? []
  const shown = matchOrganizations(all, q)
  const org = all.find((o) => o.id === chosen)
  return (
    <Stack>
      <Title order={2}>Tenants</Title>
      {orgs.isError && <ProblemAlert error={orgs.error} />}
      <Grid>
        <Grid.Col span={{ base: 12, md: 5 }}>
          <Stack>
            <TextInput label="Find an organization" placeholder="name or slug" value={q} onChange={(e) => setQ(e.currentTarget.value)} />
            <Table striped highlightOnHover withTableBorder data-testid="tenant-list">
              <Table.Thead>
                <Table.Tr><Table.Th>Organization</Table.Th><Table.Th>Plan</Table.Th></Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {shown.map((o) => (
                  <Table.Tr key={o.id} data-testid="tenant-row" data-slug={o.slug}>
                    <Table.Td>
                      <Button variant="subtle" size="compact-sm" onClick={() => setChosen(o.id)} aria-pressed={o.id === chosen}>
                        {o.name}
                      </Button>
                    </Table.Td>
                    <Table.Td>{o.plan || '—'}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
            {orgs.data && !shown.length && <Text size="sm" c="dimmed">No organization matches.</Text>}
          </Stack>
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 7 }}>
          {org ? <OrganizationPanel key={org.id} org={org} /> : <Text c="dimmed">Choose an organization to see its projects and quotas.</Text>}
        </Grid.Col>
      </Grid>
    </Stack>
  )
}
