import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Flavor } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { LeasesPage, leaseBody, leaseChange, leaseChoices, leaseSize, toLocalInput } from './Leases'

const base = { description: '', kind: '', vcpus: 8, memory_mib: 65536, disk_gib: 100, gpu_count: 0, mig_profile: '', vgpu_type: '', share_milli: 0, hugepages: false, visibility: 'public', is_active: true, created_at: '' }
const FLAVORS = [
  { ...base, id: 'f1', name: 'h100-8x', gpu_form: 'gpu', gpu_model: 'H100', gpu_count: 8 },
  { ...base, id: 'f2', name: 'h100-mig-3g40', gpu_form: 'mig', gpu_model: 'H100', mig_profile: '3g.40gb' },
  { ...base, id: 'f3', name: 'c8', gpu_form: 'none', gpu_model: '' },
] as Flavor[]
const LEASE = { id: 'l1', project: PROJECT.id, name: 'training', status: 'confirmed', start: '2026-12-10T09:00:00Z', end: '2026-12-12T09:00:00Z', time_zone: 'UTC', kind: 'gpus', gpu_model: 'H100', count: 4, mig_profile: '', share_milli: 0, zone: '', max_leaves_per_rail: null, end_action: 'stop', notice_s: 3600, reason: '', explanation: {}, confirmed_at: null, activated_at: null, ended_at: null, created_at: '', updated_at: '' }
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const PRICE = { currency: 'USD', sla_tier: 'standard', pricing_model: 'reserved', sku: 'gpu:model=H100', unit: 'hour', unit_price: '2.1', units: '4', per_hour: '8.4', hours: '48', estimate_total: '403.20' }
const CHECK_OK = { placeable: true, code: null, detail: null, reason: null, explanation: null, earliest_start: null,
  start: '2026-12-10T09:00:00Z', queue: { would_queue: false, position: null },
  quota: [{ resource: 'gpus', scope: 'organization', limit: 8, used: 0, requested: 4, exceeded: false }], price: PRICE }

function fill(label: RegExp, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } })
}

describe('leases', () => {
  it('requests a lease with the window in the chosen time zone, and shows a refusal on its field', async () => {
    let leases: unknown[] = []
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page(leases)),
      'POST /api/v1/leases/': async (request) => {
        const body = await request.json()
        if (body.end <= body.start) return problem(400, 'invalid_window', 'The end must be after the start.', { end: ['Must be after the start.'] })
        leases = [LEASE]
        return json(LEASE, 201)
      },
      'POST /api/v1/leases/check/': () => json(CHECK_OK),
    })
    renderPage(<LeasesPage />)
    expect(await screen.findByText('No leases yet')).toBeInTheDocument()
    await waitFor(() => expect(screen.getAllByLabelText(/^GPU model/)[0]).toHaveValue('H100'))
    fill(/^Name/, 'training')
    fill(/^GPUs/, '4')
    fill(/^Start/, '2026-12-10T09:00')
    fill(/^End/, '2026-12-09T09:00')
    fill(/^Time zone/, 'UTC')
    fireEvent.click(screen.getByRole('button', { name: 'Request lease' }))
    expect(await screen.findByText('Must be after the start.')).toBeInTheDocument()
    fill(/^End/, '2026-12-12T09:00')
    fireEvent.click(screen.getByRole('button', { name: 'Request lease' }))
    expect(await screen.findByRole('cell', { name: '4 × H100 GPUs' })).toBeInTheDocument()
    const post = seen.filter((r) => r.method === 'POST' && r.url.endsWith('/api/v1/leases/')).at(-1)!
    expect(await post.json()).toEqual({ project: PROJECT.id, name: 'training', kind: 'gpus', gpu_model: 'H100', count: 4,
      start: '2026-12-10 09:00', end: '2026-12-12 09:00', time_zone: 'UTC', mig_profile: '', share_milli: 0, zone: '',
      end_action: 'stop', notice_s: 3600, sla_tier: '' })
  }, 20_000)

  it('checks the window as it is filled in: price over the window, and the GPU quota at the busiest moment', async () => {
    const checks: unknown[] = []
    stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page([])),
      'POST /api/v1/leases/check/': async (request) => {
        const body = await request.json()
        checks.push(body)
        if (body.count <= 8) return json(CHECK_OK)
        return json({ ...CHECK_OK, placeable: false, code: 'quota_exceeded', reason: 'gpus', start: null,
          detail: 'Quota exceeded for gpus: limit 8, usage 6 at the busiest moment of the window, requested 16 (organization acme).',
          quota: [{ resource: 'gpus', scope: 'organization', limit: 8, used: 6, requested: 16, exceeded: true }] })
      },
    })
    renderPage(<LeasesPage />)
    expect(await screen.findByText('No leases yet')).toBeInTheDocument()
    await waitFor(() => expect(screen.getByLabelText(/^GPU model/, { selector: 'input' })).toHaveValue('H100'), { timeout: 10_000 })
    expect(screen.queryByTestId('lease-check')).toBeNull()          // nothing to check before the window is known
    fill(/^GPUs/, '4')
    fill(/^Start/, '2026-12-10T09:00')
    fill(/^End/, '2026-12-12T09:00')
    fill(/^Time zone/, 'UTC')
    expect(await screen.findByText('Can be confirmed', {}, { timeout: 10_000 })).toBeInTheDocument()
    expect(screen.getByTestId('lease-price')).toHaveTextContent('About $403.20 for the window')
    expect(checks.at(-1)).toMatchObject({ count: 4, start: '2026-12-10 09:00', end: '2026-12-12 09:00', name: 'lease' })
    fill(/^GPUs/, '16')
    expect(await screen.findByText('Would be refused', {}, { timeout: 10_000 })).toBeInTheDocument()
    expect(screen.getByText(/usage 6 at the busiest moment of the window/)).toBeInTheDocument()
    const row = within(screen.getByRole('table', { name: 'Quota this lease uses' })).getAllByRole('row')[1]
    expect(row).toHaveTextContent(/exceeded/)
    expect(row).toHaveTextContent('+16')
  }, 40_000)

  it('cancels after a confirmation, and a viewer may not', async () => {
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page([LEASE, { ...LEASE, id: 'l2', name: 'old', status: 'ended' }])),
      'POST /api/v1/leases/l1/cancel/': () => json({ ...LEASE, status: 'cancelled' }),
    })
    renderPage(<LeasesPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Cancel lease training' }))
    expect(screen.queryByRole('button', { name: 'Cancel lease old' })).toBeNull()      // ended: nothing to cancel
    fireEvent.click(await screen.findByRole('button', { name: 'Cancel lease' }))
    await waitFor(() => expect(seen.some((r) => r.method === 'POST')).toBe(true))
  })

  it('disables the request and cancel for a viewer', async () => {
    stubApi({ 'GET /api/v1/flavors/': () => json(page(FLAVORS)), 'GET /api/v1/leases/': () => json(page([LEASE])) })
    renderPage(<LeasesPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('button', { name: 'Cancel lease training' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Request lease' })).toBeDisabled()
  })

  it('describes sizes and offers the catalog’s models and MIG profiles', () => {
    expect(leaseSize({ kind: 'gpus', count: 1, gpu_model: 'H100', mig_profile: '', share_milli: 0 })).toBe('1 × H100 GPU')
    expect(leaseSize({ kind: 'hosts', count: 2, gpu_model: 'H100', mig_profile: '', share_milli: 0 })).toBe('2 hosts of H100')
    expect(leaseSize({ kind: 'mig', count: 3, gpu_model: 'H100', mig_profile: '3g.40gb', share_milli: 0 })).toBe('3 × MIG 3g.40gb on H100')
    const { models, profiles } = leaseChoices(FLAVORS)
    expect(models).toEqual(['H100'])
    expect(profiles.get('H100')).toEqual(['3g.40gb'])
    expect(leaseBody('p', { name: 'n', kind: 'mig', gpuModel: 'H100', migProfile: '3g.40gb', count: 2, start: '2026-12-10T09:00', end: '2026-12-10T17:30', timeZone: 'Europe/Berlin' }))
      .toMatchObject({ kind: 'mig', mig_profile: '3g.40gb', start: '2026-12-10 09:00', end: '2026-12-10 17:30', time_zone: 'Europe/Berlin' })
  })
})

describe('lease double submit', () => {
  it('a double click on "Request lease" sends one request', async () => {
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page([])),
      'POST /api/v1/leases/': () => json(LEASE, 201),
    })
    renderPage(<LeasesPage />)
    expect(await screen.findByText('No leases yet')).toBeInTheDocument()
    fill(/^Name/, 'training')
    fill(/^Start/, '2026-12-10T09:00')
    fill(/^End/, '2026-12-12T09:00')
    const button = screen.getByRole('button', { name: 'Request lease' })
    fireEvent.click(button)
    fireEvent.click(button)
    await waitFor(() => expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1))
    await new Promise((r) => setTimeout(r, 50))
    expect(seen.filter((r) => r.method === 'POST')).toHaveLength(1)
    expect(seen.find((r) => r.method === 'POST')!.headers.get('Idempotency-Key')).toMatch(/^[0-9a-f-]{36}$/)
  }, 20_000)
})

describe('lease changes', () => {
  it('states an extension, a shrink and a growth in words and sends only what changes', () => {
    const end = toLocalInput(LEASE.end)
    expect(leaseChange(LEASE as never, end, 4)).toEqual({ body: {}, verb: null, sentences: [] })
    const later = leaseChange(LEASE as never, toLocalInput('2026-12-13T11:30:00Z'), 4)
    expect(later.verb).toBe('Extend')
    expect(later.body).toEqual({ end: '2026-12-13T11:30:00.000Z' })
    expect(later.sentences[0]).toMatch(/^Extends the lease by 1 d 2 h 30 min: it ends /)
    expect(leaseChange(LEASE as never, toLocalInput('2026-12-11T09:00:00Z'), 4).verb).toBe('Shrink')
    const grow = leaseChange(LEASE as never, end, 6)
    expect(grow).toMatchObject({ verb: 'Grow', body: { count: 6 } })
    expect(grow.sentences).toEqual(['Grows it from 4 × H100 GPUs to 6 × H100 GPUs.'])
    expect(leaseChange(LEASE as never, toLocalInput('2026-12-13T09:00:00Z'), 2)).toMatchObject({ verb: 'Change', body: { count: 2 } })
  })

  it('extends a lease after stating the change, and shows a refusal on the field it names', async () => {
    let lease = { ...LEASE, status: 'active' }
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page([lease])),
      'GET /api/v1/queued-requests/': () => json(page([])),
      'PATCH /api/v1/leases/l1/': async (request) => {
        const body = await request.json()
        if (body.count !== undefined) return problem(400, 'lease_field_immutable', 'A started lease cannot give capacity back; shrink its end or cancel it.', { count: ['A started lease cannot give capacity back; shrink its end or cancel it.'] })
        lease = { ...lease, end: body.end }
        return json(lease)
      },
    })
    renderPage(<LeasesPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Extend or shrink lease training' }))
    const dialog = await screen.findByRole('dialog')
    expect(within(dialog).getByRole('button', { name: 'Change lease' })).toBeDisabled()     // nothing changes yet
    fireEvent.change(within(dialog).getByLabelText(/^GPUs/), { target: { value: '2' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Reduce lease' }))
    expect(await within(dialog).findByText('A started lease cannot give capacity back; shrink its end or cancel it.', { selector: '.mantine-InputWrapper-error, [id$="-error"]' })).toBeInTheDocument()
    expect(within(dialog).getByLabelText(/^GPUs/)).toHaveValue('2')                         // kept
    fireEvent.change(within(dialog).getByLabelText(/^GPUs/), { target: { value: '4' } })
    expect(within(dialog).queryByText(/cannot give capacity back/)).toBeNull()               // edited: the refusal goes
    fireEvent.change(within(dialog).getByLabelText(/^End/), { target: { value: toLocalInput('2026-12-14T09:00:00Z') } })
    expect(within(dialog).getByTestId('lease-change-summary')).toHaveTextContent('Extends the lease by 2 d')
    fireEvent.click(within(dialog).getByRole('button', { name: 'Extend lease' }))
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull())
    const patches = seen.filter((r) => r.method === 'PATCH')
    expect(await patches.at(-1)!.json()).toEqual({ end: '2026-12-14T09:00:00.000Z' })
    await waitFor(() => expect(screen.getByRole('cell', { name: new Date('2026-12-14T09:00:00Z').toLocaleString() })).toBeInTheDocument())
  }, 20_000)

  it('is disabled for a viewer', async () => {
    stubApi({ 'GET /api/v1/flavors/': () => json(page(FLAVORS)), 'GET /api/v1/leases/': () => json(page([LEASE])),
      'GET /api/v1/queued-requests/': () => json(page([])) })
    renderPage(<LeasesPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('button', { name: 'Extend or shrink lease training' })).toBeDisabled()
  })
})

describe('on-demand queue', () => {
  const QUEUED = { id: 'q1', project: PROJECT.id, instance: 'i1', cluster: null, status: 'waiting', position: 3, priority: 0, reason: 'No host has 8 free H100 GPUs.', explanation: {}, expires_at: '2026-12-11T09:00:00Z', placed_at: null, created_at: '2026-12-10T09:00:00Z', updated_at: '' }

  it('shows the waiting requests with their position and reason, and cancels one by deleting its instance', async () => {
    let waiting = [QUEUED]
    const seen = stubApi({
      'GET /api/v1/flavors/': () => json(page(FLAVORS)),
      'GET /api/v1/leases/': () => json(page([])),
      'GET /api/v1/queued-requests/': () => json(page(waiting)),
      'GET /api/v1/instances/i1/': () => json({ id: 'i1', name: 'trainer' }),
      'DELETE /api/v1/instances/i1/': () => { waiting = []; return json({}, 202) },
    })
    renderPage(<LeasesPage />)
    const row = await screen.findByTestId('queued-request')
    expect(within(row).getByTestId('queue-position')).toHaveTextContent('3')
    expect(row).toHaveTextContent('No host has 8 free H100 GPUs.')
    expect(await within(row).findByRole('link', { name: 'trainer' })).toHaveAttribute('href', '/instances/i1')
    const query = new URL(seen.find((r) => r.url.includes('queued-requests'))!.url).searchParams
    expect([query.get('project'), query.get('status')]).toEqual([PROJECT.id, 'waiting'])
    fireEvent.click(within(row).getByRole('button', { name: 'Cancel the queued instance trainer' }))
    fireEvent.click(await screen.findByRole('button', { name: 'Delete instance' }))
    expect(await screen.findByTestId('queue-empty')).toBeInTheDocument()
    expect(seen.some((r) => r.method === 'DELETE')).toBe(true)
  })
})
