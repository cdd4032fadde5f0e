import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { FleetHost, FleetSummary } from '../../api/client'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { AdminFleetPage, gpuState, moveText } from './Fleet'
import { HeatMap, filterRacks, hostSummary } from './HeatMap'

const gpu = (index: number, state: FleetHost['gpus'][number]['state'], mig = '') =>
  ({ index, state, mode: mig ? 'mig' : 'exclusive', health: state === 'faulty' ? 'faulty' : 'ok', mig })
const host = (id: string, name: string, condition: string, gpu_model: string, gpus: FleetHost['gpus']): FleetHost =>
  ({ id, name, rack_unit: 1, condition, condition_reason: '', condition_changed_at: null, last_heartbeat_at: null,
     agent_version: '', provisioning_kind: 'hypervisor', spare: false, gpu_model, mig: gpus.map((g) => g.mig).filter(Boolean).join(' '), gpus })
const H1 = host('00000000-0000-7000-8000-000000000001', 'a-su1-n01', 'available', 'H100-SXM5-80GB',
  [gpu(0, 'allocated'), gpu(1, 'free'), gpu(2, 'dirty'), gpu(3, 'faulty')])
const H2 = host('00000000-0000-7000-8000-000000000002', 'a-su1-n02', 'cordoned', 'H100-SXM5-80GB', [gpu(0, 'free', '3g.40gb×2')])
const H3 = host('00000000-0000-7000-8000-000000000003', 'b-su1-n01', 'available', 'A100-SXM4-80GB', [gpu(0, 'scrub_failed')])
const SUMMARY: FleetSummary = {
  generated_at: '2026-12-04T00:00:00Z', host_count: 3, gpu_count: 6,
  gpu_states: { free: 2, allocated: 1, dirty: 1, scrub_failed: 1, faulty: 1 }, host_conditions: { available: 2, cordoned: 1 },
  gpu_models: ['A100-SXM4-80GB', 'H100-SXM5-80GB'],
  regions: [{ name: 'eu-west', zones: [
    { name: 'eu-west-a', racks: [{ name: 'r01', hosts: [H1, H2] }] },
    { name: 'eu-west-b', racks: [{ name: 'r01', hosts: [H3] }] },
  ] }],
}
const none = { gpuModel: null, condition: null }

describe('fleet heat map', () => {
  it('draws one cell per GPU, host rows grouped by rack, and says each row in words', () => {
    const picked: string[] = []
    renderPage(<HeatMap summary={SUMMARY} filters={none} onSelect={(h) => picked.push(h.name)} />)
    const racks = screen.getAllByTestId('heatmap-rack')
    expect(racks.map((r) => r.getAttribute('aria-label'))).toEqual(['Rack r01 in eu-west-a', 'Rack r01 in eu-west-b'])
    expect(within(racks[0]).getAllByTestId('heatmap-host').map((b) => b.dataset.host)).toEqual(['a-su1-n01', 'a-su1-n02'])
    const row = screen.getByRole('button', { name: /^a-su1-n01\s*available\s*4 GPUs: 1 free, 1 allocated, 1 dirty \(scrub queued\), 1 faulty$/ })
    expect(row.querySelectorAll('span[title^="GPU "]')).toHaveLength(4)
    expect(screen.getByTitle('GPU 0: Free (MIG 3g.40gb×2)')).toBeInTheDocument()
    fireEvent.click(row)
    expect(picked).toEqual(['a-su1-n01'])
  })

  it('filters by GPU model and by condition', () => {
    expect(filterRacks(SUMMARY, { gpuModel: 'A100-SXM4-80GB', condition: null }).flatMap((r) => r.hosts.map((h) => h.name))).toEqual(['b-su1-n01'])
    expect(filterRacks(SUMMARY, { gpuModel: null, condition: 'cordoned' }).flatMap((r) => r.hosts.map((h) => h.name))).toEqual(['a-su1-n02'])
    expect(filterRacks(SUMMARY, { gpuModel: null, condition: null, gpuState: 'faulty' }).flatMap((r) => r.hosts.map((h) => h.name))).toEqual(['a-su1-n01'])
    renderPage(<HeatMap summary={SUMMARY} filters={{ gpuModel: 'B200', condition: null }} onSelect={() => {}} />)
    expect(screen.getByTestId('heatmap-empty')).toHaveTextContent('No host matches these filters.')
    expect(hostSummary(H3)).toBe('1 GPU: 1 scrub failed')
  })

  it('opens a host and cordons it with a confirmed reason; the condition changes', async () => {
    let state = 'available'
    const detail = () => ({ id: H1.id, name: H1.name, state, state_reason: state === 'cordoned' ? 'PSU swap' : '', serial: 'SER1',
      allowed_actions: state === 'available' ? ['cordon', 'drain', 'maintenance', 'mark-faulty', 'retire'] : ['drain', 'mark-available'] })
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json({ ...SUMMARY, regions: [{ name: 'eu-west', zones: [{ name: 'eu-west-a', racks: [{ name: 'r01', hosts: [{ ...H1, condition: state }] }] }] }] }),
      [`GET /api/v1/hosts/${H1.id}/`]: () => json(detail()),
      [`POST /api/v1/hosts/${H1.id}/cordon/`]: () => { state = 'cordoned'; return json(detail()) },
    })
    renderPage(<AdminFleetPage />)
    fireEvent.click(await screen.findByRole('button', { name: /^a-su1-n01\s*available/ }))
    const panel = await screen.findByTestId('host-panel')
    expect(within(panel).getByTestId('host-condition')).toHaveTextContent('available')
    fireEvent.click(await within(panel).findByRole('button', { name: 'Cordon' }))
    const dialog = await screen.findByRole('dialog', { name: 'Cordon a-su1-n01?' })
    expect(within(dialog).getByRole('button', { name: 'Cordon' })).toBeDisabled()   // a reason first
    fireEvent.change(within(dialog).getByLabelText(/^Reason/), { target: { value: 'PSU swap' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Cordon' }))
    await waitFor(() => expect(within(screen.getByTestId('host-panel')).getByTestId('host-condition')).toHaveTextContent('cordoned'))
    expect(await screen.findByRole('button', { name: /^a-su1-n01\s*cordoned/ })).toBeInTheDocument()
    expect(within(screen.getByTestId('host-panel')).queryByRole('button', { name: 'Cordon' })).toBeNull()
    const post = seen.find((r) => r.method === 'POST')!
    expect(await post.json()).toEqual({ reason: 'PSU swap', provider_at_fault: true })
  }, 20_000)

  it('shows spare hosts on the map and the panel; an operator marks a host spare with a confirmed reason', async () => {
    let spare = false
    const detail = () => ({ id: H1.id, name: H1.name, state: 'available', state_reason: '', serial: 'SER1', spare,
      allowed_actions: ['cordon', 'drain', 'maintenance', 'mark-faulty', 'retire'] })
    const summary = () => ({ ...SUMMARY, regions: [{ name: 'eu-west', zones: [{ name: 'eu-west-a', racks: [{ name: 'r01',
      hosts: [{ ...H1, spare }, { ...H2, spare: true }] }] }] }] })
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json(summary()),
      [`GET /api/v1/hosts/${H1.id}/`]: () => json(detail()),
      [`GET /api/v1/health/hosts/${H1.id}/workloads/`]: () => json({ workloads: [], remediations: [] }),
      'GET /api/v1/gpus/': () => json({ results: [], next: null, previous: null }),
      [`POST /api/v1/hosts/${H1.id}/spare/`]: () => { spare = true; return json(detail()) },
    })
    renderPage(<AdminFleetPage />)
    // the map says which hosts are spares, and "Spares only" keeps only those
    const spareRow = await screen.findByRole('button', { name: /^a-su1-n02\s*cordoned\s*spare/ })
    expect(within(spareRow).getByTestId('heatmap-spare')).toHaveTextContent('spare')
    fireEvent.click(screen.getByLabelText('Spares only'))
    await waitFor(() => expect(screen.getAllByTestId('heatmap-host').map((b) => b.dataset.host)).toEqual(['a-su1-n02']))
    fireEvent.click(screen.getByLabelText('Spares only'))
    fireEvent.click(await screen.findByRole('button', { name: /^a-su1-n01\s*available/ }))
    const panel = await screen.findByTestId('host-panel')
    expect(await within(panel).findByTestId('host-spare-pool')).toHaveTextContent('no')
    expect(within(panel).queryByTestId('host-spare')).toBeNull()
    fireEvent.click(await within(panel).findByRole('button', { name: 'Mark spare' }))
    const dialog = await screen.findByRole('dialog', { name: 'Make a-su1-n01 a spare?' })
    expect(within(dialog).getByText(/no new placement lands on it/)).toBeInTheDocument()
    expect(within(dialog).getByRole('button', { name: 'Mark spare' })).toBeDisabled()   // a reason first
    fireEvent.change(within(dialog).getByLabelText(/^Reason/), { target: { value: 'spare pool for leases' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Mark spare' }))
    await waitFor(() => expect(within(screen.getByTestId('host-panel')).getByTestId('host-spare')).toHaveTextContent('spare'))
    expect(within(screen.getByTestId('host-panel')).getByRole('button', { name: 'Unmark spare' })).toBeInTheDocument()
    expect(await screen.findByRole('button', { name: /^a-su1-n01\s*available\s*spare/ })).toBeInTheDocument()
    const post = seen.find((r) => r.method === 'POST')!
    expect(await post.json()).toEqual({ spare: true, reason: 'spare pool for leases' })
  }, 20_000)

  it('read-only staff see that a host is a spare but cannot change it', async () => {
    const detail = { id: H2.id, name: H2.name, state: 'cordoned', state_reason: '', serial: 'SER2', spare: true, allowed_actions: [] }
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/fleet/summary/': () => json({ ...SUMMARY, regions: [{ name: 'eu-west', zones: [{ name: 'eu-west-a', racks: [{ name: 'r01', hosts: [{ ...H2, spare: true }] }] }] }] }),
      [`GET /api/v1/hosts/${H2.id}/`]: () => json(detail),
      [`GET /api/v1/health/hosts/${H2.id}/workloads/`]: () => json({ workloads: [], remediations: [] }),
      'GET /api/v1/gpus/': () => json({ results: [], next: null, previous: null }),
    })
    renderPage(<AdminFleetPage />)
    fireEvent.click(await screen.findByRole('button', { name: /^a-su1-n02\s*cordoned\s*spare/ }))
    const panel = await screen.findByTestId('host-panel')
    expect(await within(panel).findByTestId('host-spare-pool')).toHaveTextContent('yes')
    expect(within(panel).getByTestId('host-spare')).toHaveTextContent('spare')
    await waitFor(() => expect(within(panel).getByText(/No action is open to you/)).toBeInTheDocument())
    expect(within(panel).queryByRole('button', { name: /spare/ })).toBeNull()
  }, 20_000)

  it('a double click on "Mark healthy" of a faulty GPU sends one request', async () => {
    const detail = { id: H1.id, name: H1.name, state: 'available', state_reason: '', serial: 'SER1',
      allowed_actions: ['cordon', 'drain', 'maintenance', 'mark-faulty', 'retire'] }
    const gpus = [{ id: 'g3', index: 3, health: 'faulty', scrub_state: 'clean', mode: 'exclusive' }]
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json(SUMMARY),
      [`GET /api/v1/hosts/${H1.id}/`]: () => json(detail),
      [`GET /api/v1/health/hosts/${H1.id}/workloads/`]: () => json({ workloads: [], remediations: [] }),
      'GET /api/v1/gpus/': () => json({ results: gpus, next: null, previous: null }),
      'POST /api/v1/gpus/g3/mark-healthy/': () => json({ ...gpus[0], health: 'ok' }),
    })
    renderPage(<AdminFleetPage />)
    fireEvent.click(await screen.findByRole('button', { name: /^a-su1-n01\s*available/ }))
    fireEvent.click(await within(await screen.findByTestId('host-panel')).findByRole('button', { name: 'Mark healthy: GPU 3' }))
    const dialog = await screen.findByRole('dialog', { name: 'Mark GPU 3 of a-su1-n01 healthy?' })
    fireEvent.change(within(dialog).getByLabelText(/^Reason/), { target: { value: 'reseated' } })
    const button = within(dialog).getByRole('button', { name: 'Mark healthy' })
    fireEvent.click(button)
    fireEvent.click(button)
    await waitFor(() => expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1))
    await new Promise((r) => setTimeout(r, 50))
    expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1)
  }, 20_000)

  it('shows each GPU\'s MIG layout: its GPU instances with their profile names and slices, and what is free', async () => {
    const detail = { id: H2.id, name: H2.name, state: 'cordoned', state_reason: '', serial: 'SER2', allowed_actions: [] }
    const gpus = [
      { id: 'g0', index: 0, health: 'ok', scrub_state: 'clean', mode: 'mig', gpu_instances: [
        { profile_id: 9, profile: '3g.40gb', start: 4, size: 4, gi_id: 2 },
        { profile_id: 14, profile: '2g.20gb', start: 0, size: 2, gi_id: 1 }] },
      { id: 'g1', index: 1, health: 'ok', scrub_state: 'clean', mode: 'mig', gpu_instances: [] },
      { id: 'g2', index: 2, health: 'ok', scrub_state: 'clean', mode: 'exclusive', gpu_instances: [] },
    ]
    const h2 = { ...H2, gpus: [gpu(0, 'free', '3g.40gb×1 2g.20gb×1'), gpu(1, 'free'), gpu(2, 'free')] }
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/fleet/summary/': () => json({ ...SUMMARY, regions: [{ name: 'eu-west', zones: [{ name: 'eu-west-a', racks: [{ name: 'r01', hosts: [h2] }] }] }] }),
      [`GET /api/v1/hosts/${H2.id}/`]: () => json(detail),
      [`GET /api/v1/health/hosts/${H2.id}/workloads/`]: () => json({ workloads: [], remediations: [] }),
      'GET /api/v1/gpus/': () => json({ results: gpus, next: null, previous: null }),
    })
    renderPage(<AdminFleetPage />)
    fireEvent.click(await screen.findByRole('button', { name: /^a-su1-n02\s*cordoned/ }, { timeout: 5000 }))
    const panel = await screen.findByTestId('host-panel')
    const layout = await within(panel).findByRole('list', { name: 'MIG layout of GPU 0' }, { timeout: 5000 })
    expect(within(layout).getAllByTestId('mig-gi').map((li) => li.textContent)).toEqual(['2g.20gb slices 0–1, GI 1', '3g.40gb slices 4–7, GI 2'])
    expect(layout).toHaveTextContent('2 of 8 slices free')
    const rows = within(panel).getAllByTestId('host-gpu')
    expect(rows[1]).toHaveTextContent('MIG on, no GPU instance')
    expect(within(rows[2]).queryByRole('list')).toBeNull()
    expect(within(panel).getByTestId('host-health-events')).toHaveAttribute('href', '/staff/health-events?host=a-su1-n02')
  }, 20_000)

  // the fleet is asked for beside /me/ (not after it, to save a round trip), and the API answers a tenant 404
  it('is not found for a tenant', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }),
      'GET /api/v1/fleet/summary/': () => problem(404, 'not_found', 'Not found.'),
    })
    renderPage(<AdminFleetPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(screen.queryByTestId('heatmap')).toBeNull()
    expect(seen.some((r) => r.url.includes('/me/'))).toBe(true)
  })
})

describe('host panel', () => {
  it('gives a GPU the map state: faulty, then the scrub, then what holds it', () => {
    const held = new Set([1])
    expect(gpuState({ index: 0, health: 'faulty', scrub_state: 'clean' }, held)).toBe('faulty')
    expect(gpuState({ index: 1, health: 'ok', scrub_state: 'dirty' }, held)).toBe('dirty')
    expect(gpuState({ index: 1, health: 'ok', scrub_state: 'clean' }, held)).toBe('allocated')
    expect(gpuState({ index: 2, health: 'ok', scrub_state: 'clean' }, held)).toBe('free')
  })

  it('says where a VM is in its move off the host', () => {
    const r = { id: 'r', instance: 'i', name: 'trainer', organization: { id: 'o', slug: 'delta', name: 'Delta' },
      consent_mode: 'auto', deadline_at: '2026-12-05T01:44:00Z', reason: '', to_host: null, created_at: '', finished_at: null }
    expect(moveText({ ...r, status: 'notice' })).toBe('moves at 2026-12-05 01:44 UTC (checkpoint notice sent)')
    expect(moveText({ ...r, status: 'succeeded', to_host: 'a-su1-n03' })).toBe('moved to a-su1-n03')
    expect(moveText({ ...r, status: 'held', reason: 'consent mode off: never moved' })).toBe('held: consent mode off: never moved')
  })
})
