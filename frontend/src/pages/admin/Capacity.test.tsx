import { screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { AdminCapacityPage } from './Capacity'
import { capacityCsv, capacityRows, totalRow, waitText, windows, type CapacityBucket, type FleetFigures } from './capacity'

// the GPUs of three hosts: n1 (available, H100: allocated, free, dirty, faulty), n2 (cordoned, H100: one free in
// MIG mode) in eu-west-a; n3 (available, A100: free, free in vGPU mode) in eu-west-b
const GPUS: FleetFigures['gpus'] = [
  { gpu_model: 'A100-SXM4-80GB', zone: 'eu-west-b', total: 2, allocated: 0, faulty: 0, scrubbing: 0, out_of_service: 0,
    mig: 0, vgpu: 1 },
  { gpu_model: 'H100-SXM5-80GB', zone: 'eu-west-a', total: 5, allocated: 1, faulty: 1, scrubbing: 1, out_of_service: 1,
    mig: 1, vgpu: 0 },
]
const W = windows(new Date('2026-12-04T10:17:42Z'), 2)
const bucket = (model: string, zone: string, start: string, free: number, extra: Partial<CapacityBucket> = {}): CapacityBucket =>
  ({ gpu_model: model, zone, start, end: start, free_gpus: free, free_hosts: 0, profiles: [], ...extra })
const NOW = [bucket('H100-SXM5-80GB', 'eu-west-a', W.now.start, 1, { leased_gpus: 1, on_demand_gpus: 0, spot_gpus: 0,
  reserve_gpus: 1, total_gpus: 4, profiles: [{ form: 'mig', profile: '3g.40gb', gpus: 1, free: 0, total: 2 }] })]
const AHEAD = [bucket('H100-SXM5-80GB', 'eu-west-a', W.weekStarts[0], 1), bucket('H100-SXM5-80GB', 'eu-west-a', W.weekStarts[1], 3),
  bucket('A100-SXM4-80GB', 'eu-west-b', W.weekStarts[1], 2)]

const FIGURES: FleetFigures = {
  generated_at: '2026-12-04T10:17:42Z', gpus: GPUS,
  fragmentation: [{ gpu_model: 'H100-SXM5-80GB', zone: 'eu-west-a', hosts: 1, free_gpus: 1, fragmented_gpus: 0.5,
    fragmentation_pct: 50, largest_free_block: 1 }],
  queue: { waiting: 2, waiting_gpus: 16, longest_wait_s: 5400, median_wait_s: 3000, window_s: 86400, placed: 3,
    placed_wait_p50_s: 240, placed_wait_max_s: 900, expired: 1 },
}

/** The same fleet with nothing stranded (no free block reported). */
const UNFRAGMENTED: FleetFigures = { ...FIGURES, fragmentation: [] }

describe('capacity figures', () => {
  it('asks the calendar for now (5 minutes from the minute) and for weeks from today 00:00 UTC', () => {
    expect(W.now).toEqual({ start: '2026-12-04T10:17:00.000Z', end: '2026-12-04T10:22:00.000Z', step_s: 300 })
    expect(W.ahead).toEqual({ start: '2026-12-04T00:00:00.000Z', end: '2026-12-18T00:00:00.000Z', step_s: 604800 })
    expect(W.weekStarts).toEqual(['2026-12-04T00:00:00.000Z', '2026-12-11T00:00:00.000Z'])
  })

  it('counts GPUs per model and zone from the fleet figures and the calendar', () => {
    const rows = capacityRows(UNFRAGMENTED, NOW, AHEAD, W.weekStarts)
    expect(rows.map((r) => [r.gpuModel, r.zone])).toEqual([['A100-SXM4-80GB', 'eu-west-b'], ['H100-SXM5-80GB', 'eu-west-a']])
    const h = rows[1]
    expect(h).toMatchObject({ total: 5, allocated: 1, faulty: 1, scrubbing: 1, outOfService: 1, mig: 1, vgpu: 0,
      leased: 1, reserved: 1, free: 1, ahead: [1, 3] })
    expect(h.slices).toEqual([{ form: 'mig', profile: '3g.40gb', gpus: 1, free: 0, total: 2 }])
    expect(rows[0]).toMatchObject({ total: 2, vgpu: 1, free: 0, ahead: [0, 2] })   // no bucket now: nothing free
    expect(totalRow(rows, 2)).toMatchObject({ total: 7, free: 1, outOfService: 1, ahead: [1, 5] })
  })

  it('puts the fragmentation beside the free GPUs of its model and zone', () => {
    const rows = capacityRows(FIGURES, NOW, AHEAD, W.weekStarts)
    expect(rows[1]).toMatchObject({ free: 1, fragmented: 0.5, largestBlock: 1 })
    expect(rows[0]).toMatchObject({ fragmented: 0, largestBlock: 0 })
    expect(totalRow(rows, 2)).toMatchObject({ fragmented: 0.5, largestBlock: 1 })
    expect([waitText(null), waitText(45), waitText(5400)]).toEqual(['—', '45 s', '1 h 30 min'])
  })

  it('exports the same figures as CSV', () => {
    const csv = capacityCsv(capacityRows(UNFRAGMENTED, NOW, AHEAD, W.weekStarts), W.weekStarts).split('\n')
    expect(csv[0]).toBe('gpu_model,zone,total,allocated,leased,on_demand,spot,reserved,free,out_of_service,faulty,scrubbing,'
      + 'mig_gpus,vgpu_gpus,fragmented_gpus,largest_free_block,slices,free_2026-12-04,free_2026-12-11')
    expect(csv[2]).toBe('H100-SXM5-80GB,eu-west-a,5,1,1,0,0,1,1,1,1,1,1,0,0,0,3g.40gb 0/2 free,1,3')
  })

  it('exports the fragmentation per row and the queue on the totals line', () => {
    const csv = capacityCsv(capacityRows(FIGURES, NOW, AHEAD, W.weekStarts), W.weekStarts, FIGURES.queue).trim().split('\n')
    expect(csv[0]).toMatch(/,fragmented_gpus,largest_free_block,slices,free_2026-12-04,free_2026-12-11,queue_waiting,queue_waiting_gpus,queue_longest_wait_s,queue_median_wait_s,queue_placed_24h,queue_placed_wait_p50_s$/)
    expect(csv[2]).toBe('H100-SXM5-80GB,eu-west-a,5,1,1,0,0,1,1,1,1,1,1,0,0.5,1,3g.40gb 0/2 free,1,3,,,,,,')
    expect(csv[3]).toBe('All models,all zones,7,1,1,0,0,1,1,1,1,1,1,1,0.5,1,,1,5,2,16,5400,3000,3,240')
  })
})

describe('capacity screen', () => {
  it('shows the rows and the totals once all three answers are in', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/capacity/': (r) => json(new URL(r.url).searchParams.get('step_s') === '300' ? NOW : AHEAD),
      'GET /api/v1/capacity/fleet-figures/': () => json(FIGURES),
    })
    renderPage(<AdminCapacityPage />)
    const table = await screen.findByTestId('capacity-table')
    await waitFor(() => expect(table).toHaveAttribute('data-ready', 'true'))
    const rows = within(table).getAllByTestId('capacity-row')
    expect(rows.map((r) => r.dataset.model)).toEqual(['A100-SXM4-80GB', 'H100-SXM5-80GB'])
    expect(within(rows[1]).getByTestId('capacity-out')).toHaveTextContent('1')
    expect(within(rows[1]).getByTestId('capacity-fragmented')).toHaveTextContent('0.5')
    expect(screen.getByTestId('capacity-queue')).toHaveTextContent('2 waiting (16 GPUs)')
    expect(screen.getByTestId('capacity-queue')).toHaveTextContent('Longest wait now: 1 h 30 min; median 50 min')
    const slice = within(screen.getByTestId('capacity-slices')).getAllByTestId('capacity-slice')
    expect(slice.map((r) => r.textContent)).toEqual(['H100-SXM5-80GBeu-west-aMIG3g.40gb102'])
    expect(within(screen.getByTestId('capacity-total')).getByTestId('capacity-free')).toHaveTextContent('1')
    expect(screen.getByRole('button', { name: 'Export CSV' })).toBeEnabled()
  })

  it('is not found for a tenant, with no figure shown', async () => {
    // the route asks for the calendar at navigation (a tenant may read it, without the staff totals)
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }),
      'GET /api/v1/capacity/fleet-figures/': () => problem(404, 'not_found', 'Not found.'),
      'GET /api/v1/capacity/': (r) => json(new URL(r.url).searchParams.get('step_s') === '300' ? NOW : AHEAD),
    })
    renderPage(<AdminCapacityPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(screen.queryByTestId('capacity-table')).not.toBeInTheDocument()
  })
})
