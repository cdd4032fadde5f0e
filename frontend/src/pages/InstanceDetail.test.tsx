import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Flavor, Instance } from '../api/client'
import { READ_ONLY_HINT } from '../components/WriteButton'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { InstanceDetailPage, availabilityLabel, currentPeriod, resizeBlocked, resizeChoices } from './InstanceDetail'

const page = <T,>(results: T[], next: string | null = null, previous: string | null = null) => ({ results, next, previous })
const base = { description: '', kind: 'vm', disk_gib: 100, gpu_count: 0, mig_profile: '', vgpu_type: '', share_milli: 0, hugepages: false, visibility: 'public', is_active: true, created_at: '' }
const MIG = { ...base, id: 'f1', name: 'mig-small', vcpus: 8, memory_mib: 65536, gpu_form: 'mig', gpu_model: 'H100', mig_profile: '3g.40gb' } as unknown as Flavor
const MIG_LARGE = { ...MIG, id: 'f2', name: 'mig-large', vcpus: 16, memory_mib: 131072 } as Flavor
const MIG_MID = { ...MIG, id: 'f5', name: 'mig-mid', vcpus: 12, memory_mib: 98304 } as Flavor
const OTHER_GPU = { ...MIG, id: 'f3', name: 'mig-1g', mig_profile: '1g.10gb' } as Flavor
const WHOLE = { ...MIG, id: 'f4', name: 'h100-8x', gpu_form: 'gpu', gpu_count: 8, mig_profile: '' } as Flavor
const ID = '0190a3b4-0000-7000-8000-0000000000e1'
const VM = {
  id: ID, project: PROJECT.id, name: 'notebook', flavor: 'f1', image: 'img', ssh_keys: [], cluster: null, status: 'stopped',
  observed_state: 'shutoff', observed_at: null, network: null, ports: [], ib_partitions: [], error_code: '', error_reason: '',
  launched_at: null, deleted_at: null, sla_tier: 'standard', maintenance: null, user_data_sha256: '', created_at: '2026-12-01T00:00:00Z',
  updated_at: '2026-12-01T00:00:00Z',
} as unknown as Instance
const EVENT = (n: number, action: string) => ({
  id: `e${n}`, created_at: '2026-12-02T10:00:00Z', actor: 'u1', actor_email: 'owner@orbit.example', actor_is_staff: false,
  token_prefix: '', organization: PROJECT.organization, project: PROJECT.id, action, target_type: 'compute.instance', target_id: ID,
  before: null, after: null, request_id: 'r', source_ip: '192.0.2.1',
})
const REPORT = {
  id: 's1', organization: PROJECT.organization, project: PROJECT.id, resource_type: 'compute.instance', resource_id: ID,
  sla_tier: 'standard', period: '2026-12', held_minutes: '43200', downtime_minutes: '43.2', uptime_pct: '99.90000000',
  target_uptime_pct: '99.9500', credit_pct: '10.00', billed_amount: '100.00',
}

function routes(instance: () => Instance, extra: Record<string, (r: Request) => Response | Promise<Response>> = {}) {
  return stubApi({
    'GET /api/v1/flavors/': () => json(page([MIG, MIG_LARGE, MIG_MID, OTHER_GPU, WHOLE])),
    'GET /api/v1/images/': () => json(page([])),
    [`GET /api/v1/instances/${ID}/`]: () => json(instance()),
    'GET /api/v1/sla-reports/': () => json(page([])),
    'GET /api/v1/audit-events/': () => json(page([])),
    ...extra,
  })
}

const show = (value = scope()) => renderPage(<InstanceDetailPage />, { path: `/instances/${ID}`, route: '/instances/:id', value })

describe('instance detail logic', () => {
  it('offers a resize only to flavors with the same GPUs', () => {
    expect(resizeChoices(MIG, [MIG, MIG_LARGE, MIG_MID, OTHER_GPU, WHOLE]).map((f) => f.name)).toEqual(['mig-large', 'mig-mid'])
    expect(resizeChoices(undefined, [MIG_LARGE])).toEqual([])
    expect(resizeChoices({ ...MIG, kind: 'baremetal' } as Flavor, [MIG_LARGE])).toEqual([])
  })

  it('says why Resize is disabled: the role, an operation, the state rule, no flavor', () => {
    expect(resizeBlocked(VM, false, [MIG_LARGE], false)).toBe(READ_ONLY_HINT)
    expect(resizeBlocked(VM, true, [MIG_LARGE], true)).toMatch(/current operation/)
    expect(resizeBlocked({ ...VM, status: 'active' }, true, [MIG_LARGE], false)).toBe(
      'Only a stopped instance can be resized (this one is active): stop it first.')
    expect(resizeBlocked(VM, true, [], false)).toMatch(/No other flavor/)
    expect(resizeBlocked(VM, true, [MIG_LARGE], false)).toBeNull()
  })

  it('names the month and the measured availability', () => {
    expect(currentPeriod(new Date('2026-12-31T23:59:00Z'))).toBe('2026-12')
    expect(availabilityLabel(undefined)).toBe('no downtime recorded')
    expect(availabilityLabel(REPORT as never)).toBe('99.9 % (target 99.95 %, 43.2 min down)')
  })
})

describe('the instance detail screen', () => {
  it('resizes a stopped instance after confirmation; a refusal stays in the dialog with the choice kept', async () => {
    let current: Instance = VM
    let refuse = true
    const seen = routes(() => current, {
      [`POST /api/v1/instances/${ID}/resize/`]: async (request) => {
        const body = await request.json()
        if (refuse) return problem(409, 'flavor_does_not_fit', 'The instance\'s host has not enough free memory for the new flavor; choose a smaller flavor.')
        current = { ...VM, flavor: body.flavor }
        return json({ instance: { ...VM, status: 'resizing', flavor: body.flavor }, operation: { id: 'op1', kind: 'instance.resize', status: 'pending' } }, 202)
      },
      'GET /api/v1/operations/op1/': () => json({ id: 'op1', kind: 'instance.resize', status: 'succeeded', step: '', error_detail: '' }),
    })
    show()
    expect(await screen.findByTestId('flavor', {}, { timeout: 5000 })).toHaveTextContent('mig-small')
    fireEvent.click(await screen.findByRole('button', { name: 'Resize' }, { timeout: 5000 }))
    const dialog = await screen.findByRole('dialog', {}, { timeout: 5000 })
    expect(dialog).toHaveTextContent('Resize notebook')
    const combo = () => within(dialog).getByRole('combobox', { name: 'New flavor' })
    fireEvent.click(combo())
    expect(within(dialog).queryByRole('option', { name: /mig-1g/, hidden: true })).toBeNull()
    fireEvent.click(await within(dialog).findByRole('option', { name: /^mig-large/, hidden: true }, { timeout: 5000 }))
    fireEvent.click(within(dialog).getByRole('button', { name: 'Resize to mig-large' }))
    expect(await within(dialog).findByTestId('problem', {}, { timeout: 5000 })).toHaveTextContent('has not enough free memory')
    expect(within(dialog).getByRole('combobox', { name: 'New flavor' })).toHaveValue('mig-large — 16 vCPU · 128 GiB RAM · 100 GiB disk')
    refuse = false
    fireEvent.click(combo())
    fireEvent.click(await within(dialog).findByRole('option', { name: /^mig-mid/, hidden: true }, { timeout: 5000 }))
    expect(within(dialog).queryByTestId('problem')).toBeNull()     // another choice: the old refusal is gone
    fireEvent.click(within(dialog).getByRole('button', { name: 'Resize to mig-mid' }))
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull(), { timeout: 5000 })
    expect(await screen.findByTestId('operation', {}, { timeout: 5000 })).toHaveTextContent('Last operation: Resize: done')
    await waitFor(() => expect(screen.getByTestId('flavor')).toHaveTextContent('mig-mid'), { timeout: 5000 })
    expect(screen.getByTestId('size')).toHaveTextContent('12 vCPU')
    const posts = seen.filter((r) => r.method === 'POST')
    expect(posts).toHaveLength(2)
    expect(await posts[0].json()).toEqual({ flavor: 'f2' })
    expect(await posts[1].json()).toEqual({ flavor: 'f5' })
  }, 20_000)

  it('disables Resize on a running instance and shows the rule', async () => {
    routes(() => ({ ...VM, status: 'active' }))
    show()
    const button = await screen.findByRole('button', { name: 'Resize' })
    expect(button).toBeDisabled()
    expect(button).toHaveAccessibleDescription('Only a stopped instance can be resized (this one is active): stop it first.')
  })

  it('disables Resize for a viewer', async () => {
    routes(() => VM)
    show(scope({ canWrite: false }))
    const button = await screen.findByRole('button', { name: 'Resize' })
    expect(button).toBeDisabled()
    expect(button).toHaveAccessibleDescription(READ_ONLY_HINT)
  })

  it('lists the audit events whose target is the instance, paged', async () => {
    const seen = routes(() => VM, {
      'GET /api/v1/audit-events/': (r) => new URL(r.url).searchParams.get('cursor') === 'c2'
        ? json(page([EVENT(3, 'compute.instance.create')], null, 'http://x/?cursor=c1'))
        : json(page([EVENT(1, 'compute.instance.resize'), EVENT(2, 'compute.instance.stop_refused')], 'http://x/?cursor=c2')),
    })
    show()
    fireEvent.click(await screen.findByRole('tab', { name: 'Audit events' }))
    const rows = await screen.findAllByTestId('instance-audit-event')
    expect(rows.map((r) => r.textContent)).toEqual([
      expect.stringContaining('compute.instance.resize'), expect.stringContaining('compute.instance.stop_refused'),
    ])
    expect(rows[1]).toHaveTextContent('refused')
    const query = new URL(seen.find((r) => r.url.includes('/audit-events/'))!.url).searchParams
    expect(query.get('target_type')).toBe('compute.instance')
    expect(query.get('target_id')).toBe(ID)
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    await waitFor(() => expect(screen.getAllByTestId('instance-audit-event')[0]).toHaveTextContent('compute.instance.create'))
    expect(screen.getByText('Page 2')).toBeInTheDocument()
  })

  it('names its subnet, security groups and SSH keys, not their ids', async () => {
    const vm = { ...VM, ssh_keys: ['k1'], ports: [{ id: 'p1', subnet: 's1', mac_address: 'fa:16:3e:00:00:01', fixed_ips: ['10.40.1.5'], security_groups: ['g1', 'g2'] }] } as unknown as Instance
    routes(() => vm, {
      'GET /api/v1/subnets/': () => json(page([{ id: 's1', name: 'gpu', cidr: '10.40.1.0/24' }])),
      'GET /api/v1/security-groups/': () => json(page([{ id: 'g1', name: 'default' }, { id: 'g2', name: 'ssh' }])),
      'GET /api/v1/ssh-keys/': () => json(page([{ id: 'k1', name: 'laptop' }])),
    })
    show()
    await waitFor(() => expect(screen.getByTestId('subnet')).toHaveTextContent('gpu (10.40.1.0/24)'))
    await waitFor(() => expect(screen.getByTestId('security-groups')).toHaveTextContent('default, ssh'))
    await waitFor(() => expect(screen.getByTestId('ssh-keys')).toHaveTextContent('laptop'))
  })

  it('opens the tab its URL names (a reload or a link keeps the console log open), and reads the log only there', async () => {
    const seen = routes(() => ({ ...VM, status: 'active' } as Instance), {
      [`GET /api/v1/instances/${ID}/console-log/`]: () => json({ instance: ID, log: 'Booting Linux' }),
    })
    renderPage(<InstanceDetailPage />, { path: `/instances/${ID}?tab=log`, route: '/instances/:id' })
    expect(await screen.findByRole('tab', { name: 'Console log', selected: true })).toBeInTheDocument()
    await waitFor(() => expect(seen.some((r) => r.url.includes('/console-log/'))).toBe(true))
  })

  it('shows this month\'s availability beside the status: the report row, or no downtime recorded', async () => {
    let rows: unknown[] = []
    const seen = routes(() => VM, { 'GET /api/v1/sla-reports/': () => json(page(rows)) })
    const { unmount } = show(scope({ project: PROJECT }))
    expect(await screen.findByTestId('availability')).toHaveTextContent(`Availability ${currentPeriod()}: no downtime recorded`)
    const query = new URL(seen.find((r) => r.url.includes('/sla-reports/'))!.url).searchParams
    expect(query.get('organization')).toBe(PROJECT.organization)
    expect(query.get('period')).toBe(currentPeriod())
    expect(query.get('resource_id')).toBe(ID)
    unmount()
    rows = [REPORT]
    show()
    expect(await screen.findByTestId('availability')).toHaveTextContent('99.9 % (target 99.95 %, 43.2 min down)')
  })

  it('leaves availability out when the report cannot be read', async () => {
    routes(() => VM, { 'GET /api/v1/sla-reports/': () => problem(403, 'permission_denied', 'Billing readers only.') })
    show()
    expect(await screen.findByTestId('status')).toHaveTextContent('stopped')
    await waitFor(() => expect(screen.queryByTestId('availability')).toBeNull())
    expect(screen.queryByRole('alert')).toBeNull()
  })
})
