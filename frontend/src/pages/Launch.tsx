import {
  Alert, Anchor, Badge, Button, Checkbox, Group, Loader, MultiSelect, NumberInput, Paper, Radio, SegmentedControl, Select, Stack,
  Stepper, Table, Text, TextInput, Title,
} from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useMemo, useState } from 'react'
import { Link, useNavigate } from 'react-router'
import { ApiError, api, unwrap, type Flavor, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { gpuLabel, imageLabel, sizeLabel, useFlavors, useImages } from '../hooks/catalog'

type Market = 'on_demand' | 'spot'
type Check = Schemas['PlacementCheckOutput']

export interface LaunchForm {
  gpuModel: string | null
  flavor: string | null
  name: string
  image: string | null
  sshKeys: string[]
  subnet: string | null
  securityGroups: string[]
  ibPartition: string | null
  market: Market
}

const EMPTY: LaunchForm = {
  gpuModel: null, flavor: null, name: '', image: null, sshKeys: [], subnet: null, securityGroups: [], ibPartition: null, market: 'on_demand',
}

/** Which wizard step holds each field the API may name in `errors`. */
const FIELD_STEP: Record<string, number> = {
  flavor: 0, name: 1, image: 1, ssh_keys: 1, subnet_id: 2, security_group_ids: 2, ib_partition_id: 2, project: 0,
}

/** The body of POST /instances/ (and of its dry run, POST /instances/check/) for the form. */
export function createBody(form: LaunchForm, project: string, queue = false): Schemas['InstanceCreateInputRequest'] {
  return {
    project,
    name: form.name.trim(),
    flavor: form.flavor ?? '',
    image: form.image ?? '',
    ssh_keys: form.sshKeys,
    user_data: '',
    sla_tier: '', // the organization's default tier
    ...(form.subnet ? { subnet_id: form.subnet, security_group_ids: form.securityGroups } : {}),
    ...(form.ibPartition ? { ib_partition_id: form.ibPartition } : {}),
    queue,
  }
}

/** "GPU model" choices: each model offered, then CPU-only flavors. */
export function gpuModels(flavors: Flavor[]): string[] {
  const models = [...new Set(flavors.filter((f) => f.gpu_model && f.gpu_form !== 'none').map((f) => f.gpu_model))]
  models.sort()
  return flavors.some((f) => !f.gpu_model || f.gpu_form === 'none') ? [...models, 'CPU only'] : models
}

/** The estimated cost of running `hours` at the list price `perHour` (a decimal string, as the check answers it):
 * the product, or null when either is missing or not a number. An estimate only: billing is per second of use
 * with the price book's minimum, and the price may change. */
export function estimate(perHour: string | null | undefined, hours: number | string | null | undefined): number | null {
  const price = Number(perHour)
  const h = Number(hours)
  if (perHour == null || hours == null || hours === '' || !Number.isFinite(price) || !Number.isFinite(h) || h < 0) return null
  return Math.round(price * h * 10_000) / 10_000
}

function money(amount: string | null | undefined, currency: string): string {
  if (amount == null) return '—'
  const n = Number(amount)
  return Number.isFinite(n) ? new Intl.NumberFormat('en-US', { style: 'currency', currency, maximumFractionDigits: 4 }).format(n) : amount
}

function CheckResult({ check, market }: { check: Check; market: Market }) {
  const price = check.price
  return (
    <Stack gap="sm" data-testid="placement-check">
      <Group>
        {check.placeable ? (
          <Badge color="teal.9" size="lg">Can be placed now</Badge>
        ) : check.queue.would_queue || check.code === 'capacity_unavailable' ? (
          <Badge color="yellow.4" autoContrast size="lg">No capacity right now</Badge>
        ) : (
          <Badge color="red.9" size="lg">Cannot be launched</Badge>
        )}
        {price?.per_hour != null && market === 'on_demand' && (
          <Text fw={600} data-testid="price">
            {money(price.per_hour, price.currency)} per hour
            <Text span c="dimmed" size="sm">
              {' '}({price.sla_tier} tier, {price.pricing_model.replace('_', '-')})
            </Text>
          </Text>
        )}
        {price && price.per_hour == null && <Text c="dimmed">No list price for this flavor yet.</Text>}
      </Group>
      {check.detail && (
        <Text>
          <strong>Why:</strong> {check.detail}
          {check.reason ? ` (${check.reason})` : ''}
        </Text>
      )}
      {check.earliest_start && (
        <Text>
          <strong>Fits from:</strong> {new Date(check.earliest_start).toLocaleString()} (when running allocations end)
        </Text>
      )}
      {check.queue.position != null && (
        <Text>
          <strong>Queue:</strong> it would be number {check.queue.position} in the on-demand queue.
        </Text>
      )}
      {check.quota.length > 0 && (
        <Table aria-label="Quota this launch uses">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Quota</Table.Th>
              <Table.Th>Used</Table.Th>
              <Table.Th>This launch</Table.Th>
              <Table.Th>Limit</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {check.quota.map((q) => (
              <Table.Tr key={`${q.scope}:${q.resource}`} c={q.exceeded ? 'red.8' : undefined}>
                <Table.Td>
                  {q.resource} ({q.scope}){q.exceeded ? ' — exceeded' : ''}
                </Table.Td>
                <Table.Td>{q.used}</Table.Td>
                <Table.Td>+{q.requested}</Table.Td>
                <Table.Td>{q.limit}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  )
}

/** Hours × the flavor's list price per hour (what the check answered), labelled as an estimate. */
function CostEstimate({ price, market, hours, onHours }: {
  price: Check['price'] | undefined
  market: Market
  hours: number | string
  onHours: (hours: number | string) => void
}) {
  const total = estimate(price?.per_hour, hours)
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="estimate-heading">
      <Title order={3} size="h4" id="estimate-heading" mb="xs">
        Cost estimate
      </Title>
      <Group align="flex-end">
        <NumberInput
          label="Running for (hours)"
          min={0}
          max={24 * 366}
          step={1}
          w={180}
          value={hours}
          onChange={onHours}
          disabled={market === 'spot'}
        />
        <Text data-testid="estimate" pb={6}>
          {market === 'spot'
            ? 'Spot prices follow the market: no estimate.'
            : price?.per_hour == null
              ? 'No list price for this flavor yet: no estimate.'
              : total == null
                ? 'Enter a number of hours.'
                : <>
                    <strong>About {money(String(total), price.currency)}</strong> for {Number(hours)} hour{Number(hours) === 1 ? '' : 's'} at{' '}
                    {money(price.per_hour, price.currency)} per hour (estimate)
                  </>}
        </Text>
      </Group>
      <Text size="xs" c="dimmed" mt="xs">
        An estimate, not a quote: billing is per second of actual use (with the price book’s minimum), before taxes and
        credits.
      </Text>
    </Paper>
  )
}

export function LaunchPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const navigate = useNavigate()
  const qc = useQueryClient()
  const [step, setStep] = useState(0)
  const [form, setForm] = useState<LaunchForm>(EMPTY)
  const set = <K extends keyof LaunchForm>(key: K, value: LaunchForm[K]) => setForm((f) => ({ ...f, [key]: value }))

  const flavors = useFlavors()
  const images = useImages()
  const keys = useQuery({
    queryKey: ['ssh-keys', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/ssh-keys/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const subnets = useQuery({
    queryKey: ['subnets', pid],
    queryFn: () => unwrap(api.GET('/api/v1/subnets/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const subnet = subnets.data?.results.find((s) => s.id === form.subnet)
  const partitions = useQuery({
    queryKey: ['ib-partitions', pid, 'all'],
    queryFn: () => unwrap(api.GET('/api/v1/ib-partitions/', { params: { query: { project: pid, page_size: 500 } } })),
  })
  const partition = partitions.data?.results.find((p) => p.id === form.ibPartition)
  const [hours, setHours] = useState<number | string>(24)
  const groups = useQuery({
    queryKey: ['security-groups', subnet?.vpc],
    queryFn: () => unwrap(api.GET('/api/v1/security-groups/', { params: { query: { vpc: subnet!.vpc, page_size: 500 } } })),
    enabled: Boolean(subnet),
  })

  const models = gpuModels(flavors.data ?? [])
  const model = form.gpuModel ?? models[0] ?? null
  const choices = (flavors.data ?? []).filter((f) =>
    model === 'CPU only' ? !f.gpu_model || f.gpu_form === 'none' : f.gpu_model === model && f.gpu_form !== 'none',
  )
  const flavor = flavors.data?.find((f) => f.id === form.flavor)
  const image = images.data?.find((i) => i.id === form.image)
  const body = createBody(form, pid)
  const bodyKey = JSON.stringify(body)

  const check = useQuery({
    queryKey: ['instance-check', bodyKey],
    queryFn: () => unwrap(api.POST('/api/v1/instances/check/', { body })),
    enabled: step === 3 && Boolean(form.flavor && form.image && form.name.trim()),
    staleTime: 0,
    retry: false,
  })

  // As soon as a flavor is chosen: can it be placed now, and at what price (the check without name and image,
  // which are not chosen yet; the review step checks the whole request again).
  const flavorCheck = useQuery({
    queryKey: ['instance-check-flavor', pid, form.flavor],
    queryFn: () =>
      unwrap(api.POST('/api/v1/instances/check/', {
        body: { project: pid, flavor: form.flavor ?? '', name: '', ssh_keys: [], user_data: '', sla_tier: '', queue: false },
      })),
    enabled: step === 0 && Boolean(pid && form.flavor),
    staleTime: 5_000,
    retry: false,
  })

  // One Idempotency-Key per distinct request: a double click or a retry after a lost answer creates one instance.
  const idempotencyKey = useMemo(() => crypto.randomUUID(), [bodyKey, form.market])
  const launch = useMutation({
    mutationFn: async (queue: boolean) => {
      const headers = { 'Idempotency-Key': `${idempotencyKey}${queue ? '-q' : ''}` }
      if (form.market === 'spot') {
        const answer = await unwrap(api.POST('/api/v1/instance-requests/', {
          body: { project: pid, name: body.name, flavor: body.flavor, image: body.image, ssh_keys: body.ssh_keys, user_data: '', market: 'spot', queue_timeout_s: 0 },
          headers,
        }))
        return answer.instance
      }
      const answer = await unwrap(api.POST('/api/v1/instances/', { body: createBody(form, pid, queue), params: { header: headers } }))
      return answer.instance
    },
    onSuccess: (instance) => {
      void qc.invalidateQueries({ queryKey: ['instances'] })
      navigate(`/instances/${instance.id}`)
    },
    onError: (error) => {
      if (error instanceof ApiError) {
        const steps = Object.keys(error.errors).map((f) => FIELD_STEP[f]).filter((s) => s !== undefined)
        if (steps.length) setStep(Math.min(...steps))
      }
    },
  })
  const err = launch.error

  const stepValid = [Boolean(form.flavor), Boolean(form.name.trim() && form.image), true, true]
  const next = () => setStep((s) => Math.min(3, s + 1))
  const back = () => setStep((s) => Math.max(0, s - 1))

  if (flavors.isSuccess && (flavors.data ?? []).length === 0)
    return (
      <EmptyState title="No flavors are offered yet">
        The provider has not published instance types for your organization. Ask your provider's support.
      </EmptyState>
    )

  return (
    <Stack>
      <Title order={2}>Launch an instance</Title>
      <ProblemAlert error={err} title="The instance was not launched" shownFields={Object.keys(FIELD_STEP)} />
      <Stepper active={step} onStepClick={setStep} allowNextStepsSelect={false} size="sm">
        <Stepper.Step label="Flavor" description="GPU model and slice">
          <Stack mt="md">
            <SegmentedControl
              aria-label="GPU model"
              data={models}
              value={model ?? ''}
              onChange={(v) => setForm((f) => ({ ...f, gpuModel: v, flavor: null }))}
            />
            <Radio.Group
              label="Flavor"
              description="Whole GPUs, or a MIG slice of one"
              value={form.flavor}
              onChange={(v) => set('flavor', v)}
              error={fieldError(err, 'flavor')}
              required
            >
              <Stack gap="xs" mt="xs">
                {flavors.isPending && <Loader role="status" size="sm" aria-label="Loading flavors" />}
                {choices.map((f) => (
                  <Radio key={f.id} value={f.id} label={`${f.name} — ${gpuLabel(f)}`} description={sizeLabel(f)} />
                ))}
              </Stack>
            </Radio.Group>
            {form.flavor && (
              <Paper withBorder p="md" aria-live="polite" data-testid="flavor-check">
                {flavorCheck.isFetching && !flavorCheck.data && <Loader role="status" size="sm" aria-label="Checking" />}
                <ProblemAlert error={flavorCheck.error} title="The check was refused" />
                {flavorCheck.data && <CheckResult check={flavorCheck.data} market={form.market} />}
              </Paper>
            )}
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="Image and access" description="OS, name, SSH keys">
          <Stack mt="md" maw={560}>
            <TextInput
              label="Name"
              description="Becomes the hostname: lower-case letters, digits and hyphens, at most 63 characters"
              required
              maxLength={63}
              value={form.name}
              onChange={(e) => set('name', e.currentTarget.value)}
              error={fieldError(err, 'name')}
            />
            <Select
              label="Image"
              required
              placeholder="Choose an image"
              data={(images.data ?? []).map((i) => ({ value: i.id, label: imageLabel(i) }))}
              value={form.image}
              onChange={(v) => set('image', v)}
              error={fieldError(err, 'image')}
            />
            <Checkbox.Group
              label="SSH keys"
              description="Installed for the default user"
              value={form.sshKeys}
              onChange={(v) => set('sshKeys', v)}
              error={fieldError(err, 'ssh_keys')}
            >
              <Stack gap="xs" mt="xs">
                {(keys.data?.results ?? []).map((k) => (
                  <Checkbox key={k.id} value={k.id} label={`${k.name} (${k.fingerprint})`} />
                ))}
                {keys.isSuccess && keys.data.results.length === 0 && (
                  <Text size="sm">
                    No keys in this project: <Anchor component={Link} to="/ssh-keys">add one</Anchor> to sign in to the
                    instance with SSH.
                  </Text>
                )}
              </Stack>
            </Checkbox.Group>
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="Network and market" description="Subnet, security groups, spot">
          <Stack mt="md" maw={560}>
            <Radio.Group label="Market" value={form.market} onChange={(v) => set('market', v as Market)}>
              <Group mt="xs">
                <Radio value="on_demand" label="On-demand" description="Runs until you stop or delete it" />
                <Radio value="spot" label="Spot" description="Cheaper; may be interrupted when capacity is needed" />
              </Group>
            </Radio.Group>
            <Select
              label="Subnet"
              placeholder="No private network"
              clearable
              disabled={form.market === 'spot'}
              description={form.market === 'spot' ? 'Spot requests join no subnet (the request API takes none)' : 'The instance gets a port with a fixed IP'}
              data={(subnets.data?.results ?? []).map((s) => ({ value: s.id, label: `${s.name} (${s.cidr})` }))}
              value={form.subnet}
              onChange={(v) => setForm((f) => ({ ...f, subnet: v, securityGroups: [] }))}
              error={fieldError(err, 'subnet_id')}
            />
            <MultiSelect
              label="Security groups"
              placeholder={form.subnet ? 'Default group of the VPC' : 'Choose a subnet first'}
              disabled={!form.subnet || form.market === 'spot'}
              data={(groups.data?.results ?? []).map((g) => ({ value: g.id, label: g.name }))}
              value={form.securityGroups}
              onChange={(v) => set('securityGroups', v)}
              error={fieldError(err, 'security_group_ids')}
            />
            <Select
              label="InfiniBand partition (optional)"
              placeholder={(partitions.data?.results ?? []).length ? 'No InfiniBand partition' : 'No partitions in this project'}
              clearable
              disabled={form.market === 'spot'}
              description={form.market === 'spot'
                ? 'Spot requests join no partition (the request API takes none)'
                : 'Its HCA ports (or a virtual function’s GUID) join the partition as full members once placed'}
              data={(partitions.data?.results ?? []).map((p) => ({ value: p.id, label: `${p.name} (${p.fabric}, ${p.pkey_hex})` }))}
              value={form.ibPartition}
              onChange={(v) => set('ibPartition', v)}
              error={fieldError(err, 'ib_partition_id')}
            />
          </Stack>
        </Stepper.Step>
        <Stepper.Step label="Review" description="Placement and price">
          <Stack mt="md">
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>Flavor</dt>
                <dd>{flavor ? `${flavor.name} — ${gpuLabel(flavor)}, ${sizeLabel(flavor)}` : '—'}</dd>
                <dt>Image</dt>
                <dd>{imageLabel(image)}</dd>
                <dt>Name</dt>
                <dd>{form.name || '—'}</dd>
                <dt>SSH keys</dt>
                <dd>{form.sshKeys.length || 'none'}</dd>
                <dt>Network</dt>
                <dd>{subnet ? `${subnet.name} (${subnet.cidr})` : 'none'}</dd>
                <dt>InfiniBand</dt>
                <dd>{partition ? `${partition.name} (${partition.fabric}, ${partition.pkey_hex})` : 'none'}</dd>
                <dt>Market</dt>
                <dd>{form.market === 'spot' ? 'spot' : 'on-demand'}</dd>
              </dl>
            </Paper>
            <Paper withBorder p="md" component="section" aria-labelledby="check-heading" aria-busy={check.isFetching}>
              <Group justify="space-between" mb="xs">
                <Title order={3} size="h4" id="check-heading">
                  Can it be placed now?
                </Title>
                <Button variant="subtle" size="xs" onClick={() => void check.refetch()} loading={check.isFetching}>
                  Check again
                </Button>
              </Group>
              {check.isPending && check.fetchStatus === 'fetching' && <Loader role="status" size="sm" aria-label="Checking" />}
              <ProblemAlert error={check.error} title="The check was refused" />
              {check.data && <CheckResult check={check.data} market={form.market} />}
            </Paper>
            <CostEstimate
              price={(check.data ?? flavorCheck.data)?.price}
              market={form.market}
              hours={hours}
              onHours={setHours}
            />
            {!canWrite && <Alert color="yellow">Your role in this project is read-only: you cannot launch.</Alert>}
          </Stack>
        </Stepper.Step>
      </Stepper>
      <Group justify="space-between">
        <Button variant="default" onClick={back} disabled={step === 0}>
          Back
        </Button>
        {step < 3 ? (
          <Button onClick={next} disabled={!stepValid[step]}>
            Next
          </Button>
        ) : (
          <Group>
            {check.data && !check.data.placeable && check.data.code === 'capacity_unavailable' && form.market === 'on_demand' && (
              <WriteButton variant="light" onClick={() => launch.mutate(true)} loading={launch.isPending && launch.variables}>
                Queue until it fits
              </WriteButton>
            )}
            <WriteButton
              onClick={() => launch.mutate(false)}
              loading={launch.isPending && !launch.variables}
              disabled={!stepValid[0] || !stepValid[1] || (check.data ? !check.data.placeable && form.market === 'on_demand' : false)}
            >
              Launch
            </WriteButton>
          </Group>
        )}
      </Group>
    </Stack>
  )
}
