// The capacity screen's figures (Capacity.tsx), computed from two APIs: the fleet figures (the GPUs per model and
// zone in the heat map's states, the fragmentation and the on-demand queue) and the capacity calendar (staff view:
// free, leased, on-demand, spot and the on-demand reserve per GPU model and zone, per time bucket, for available
// hosts only).
import type { Schemas } from '../../api/client'

export type CapacityBucket = Schemas['CapacityBucket']
export type FleetFigures = Schemas['FleetCapacityFigures']
export type QueueFigures = FleetFigures['queue']

export interface SliceFigure {
  form: string
  profile: string
  gpus: number
  free: number
  total: number
}

export interface CapacityRow {
  key: string
  gpuModel: string
  zone: string
  /** GPUs of the model in the zone on hosts that are not retired */
  total: number
  /** held by a live allocation (instances, cluster members, leases), in the heat map's states (fleet figures) */
  allocated: number
  leased: number
  onDemand: number
  spot: number
  /** the operator's on-demand reserve (GPUs kept back from leases) */
  reserved: number
  /** GPUs a new request could get now: on available hosts, held by nothing, net of the reserve */
  free: number
  /** GPUs on hosts that are not available (cordoned, draining, maintenance, faulty, enrolling) */
  outOfService: number
  /** GPUs whose health is faulty */
  faulty: number
  /** GPUs waiting for (or failed) their scrub after a tenant */
  scrubbing: number
  mig: number
  vgpu: number
  /** of the free whole GPUs (held by nothing now, spot aside), those stranded for the typical requests (FGD's
   * measure, `GET /capacity/fleet-figures/`) */
  fragmented: number
  /** the most free whole GPUs on one host */
  largestBlock: number
  slices: SliceFigure[]
  /** free GPUs in each coming bucket of the calendar (`weeks`), in order */
  ahead: number[]
}

const rowKey = (model: string, zone: string) => `${model}\u0000${zone}`

function emptyRow(gpuModel: string, zone: string, weeks: number): CapacityRow {
  return {
    key: rowKey(gpuModel, zone), gpuModel, zone, total: 0, allocated: 0, leased: 0, onDemand: 0, spot: 0,
    reserved: 0, free: 0, outOfService: 0, faulty: 0, scrubbing: 0, mig: 0, vgpu: 0, fragmented: 0, largestBlock: 0,
    slices: [],
    ahead: Array(weeks).fill(0),
  }
}

/** One row per GPU model and zone (sorted by model, then zone). `now` is the calendar's current bucket,
 * `ahead` its buckets of the coming weeks (`weekStarts` the start of each, ISO). A host's GPUs count under its
 * model (`gpu_model`; a host of mixed models under the first it names). */
export function capacityRows(figures: FleetFigures, now: CapacityBucket[], ahead: CapacityBucket[],
  weekStarts: string[]): CapacityRow[] {
  const rows = new Map<string, CapacityRow>()
  const row = (model: string, zone: string) => {
    const k = rowKey(model, zone)
    let r = rows.get(k)
    if (!r) {
      r = emptyRow(model, zone, weekStarts.length)
      rows.set(k, r)
    }
    return r
  }
  for (const c of figures.gpus) {
    const r = row(c.gpu_model, c.zone)
    r.total = c.total
    r.allocated = c.allocated
    r.faulty = c.faulty
    r.scrubbing = c.scrubbing
    r.outOfService = c.out_of_service
    r.mig = c.mig
    r.vgpu = c.vgpu
  }
  for (const b of now) {
    const r = row(b.gpu_model, b.zone)
    r.leased = b.leased_gpus ?? 0
    r.onDemand = b.on_demand_gpus ?? 0
    r.spot = b.spot_gpus ?? 0
    r.reserved = b.reserve_gpus ?? 0
    r.free = b.free_gpus
    r.slices = b.profiles.map((p) => ({ form: p.form, profile: p.profile, gpus: p.gpus, free: p.free, total: p.total ?? 0 }))
  }
  const index = new Map(weekStarts.map((s, i) => [new Date(s).getTime(), i]))
  for (const b of ahead) {
    const i = index.get(new Date(b.start).getTime())
    if (i !== undefined) row(b.gpu_model, b.zone).ahead[i] = b.free_gpus
  }
  for (const f of figures.fragmentation) {
    const r = row(f.gpu_model, f.zone)
    r.fragmented = f.fragmented_gpus
    r.largestBlock = f.largest_free_block
  }
  return [...rows.values()].sort((a, b) => a.gpuModel.localeCompare(b.gpuModel) || a.zone.localeCompare(b.zone))
}

/** The fleet's totals: the same figures summed over the rows (slices and `ahead` summed per position). */
export function totalRow(rows: CapacityRow[], weeks: number): CapacityRow {
  const t = emptyRow('All models', 'all zones', weeks)
  t.key = 'total'
  for (const r of rows) {
    for (const f of ['total', 'allocated', 'leased', 'onDemand', 'spot', 'reserved', 'free', 'outOfService', 'faulty',
      'scrubbing', 'mig', 'vgpu', 'fragmented'] as const)
      t[f] += r[f]
    t.largestBlock = Math.max(t.largestBlock, r.largestBlock)
    r.ahead.forEach((v, i) => { t.ahead[i] += v })
  }
  t.fragmented = Math.round(t.fragmented * 10) / 10
  return t
}

/** "2 h 05 min", "45 s", "—" for none. */
export function waitText(s: number | null | undefined): string {
  if (s === null || s === undefined) return '—'
  if (s < 60) return `${s} s`
  const m = Math.round(s / 60)
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`
}

/** "3g.40gb 12/24 free" for each MIG profile / vGPU type; "shares 3,500/8,000 milli-GPU free" for shares. */
export function sliceText(s: SliceFigure): string {
  if (s.form === 'share') return `shares ${s.free.toLocaleString('en-US')}/${s.total.toLocaleString('en-US')} milli-GPU free`
  return `${s.profile} ${s.free}/${s.total} free`
}

export const CSV_COLUMNS = ['gpu_model', 'zone', 'total', 'allocated', 'leased', 'on_demand', 'spot', 'reserved', 'free',
  'out_of_service', 'faulty', 'scrubbing', 'mig_gpus', 'vgpu_gpus', 'fragmented_gpus', 'largest_free_block', 'slices'] as const
export const CSV_QUEUE_COLUMNS = ['queue_waiting', 'queue_waiting_gpus', 'queue_longest_wait_s', 'queue_median_wait_s',
  'queue_placed_24h', 'queue_placed_wait_p50_s'] as const

/** The table as CSV (RFC 4180: comma-separated, fields with a comma or quote quoted), one line per row, then a
 * column per coming week (`free_<date>`); with `queue`, a last line of the fleet's totals ("All models", "all
 * zones") carrying the on-demand queue's figures in the `queue_*` columns (empty on the other lines: the queue is
 * the fleet's, not a zone's). */
export function capacityCsv(rows: CapacityRow[], weekStarts: string[], queue?: QueueFigures): string {
  const q = (v: string | number) => {
    const s = String(v)
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
  }
  const head = [...CSV_COLUMNS, ...weekStarts.map((w) => `free_${w.slice(0, 10)}`), ...(queue ? CSV_QUEUE_COLUMNS : [])]
  const line = (r: CapacityRow, tail: (string | number)[]) => [r.gpuModel, r.zone, r.total, r.allocated, r.leased, r.onDemand,
    r.spot, r.reserved, r.free, r.outOfService, r.faulty, r.scrubbing, r.mig, r.vgpu, r.fragmented, r.largestBlock,
    r.slices.map(sliceText).join('; '), ...r.ahead, ...tail].map(q).join(',')
  const blank = queue ? CSV_QUEUE_COLUMNS.map(() => '') : []
  const lines = rows.map((r) => line(r, blank))
  if (queue) {
    const opt = (v: number | null | undefined) => (v === null || v === undefined ? '' : v)
    lines.push(line(totalRow(rows, weekStarts.length), [queue.waiting, queue.waiting_gpus, opt(queue.longest_wait_s),
      opt(queue.median_wait_s), queue.placed, opt(queue.placed_wait_p50_s)]))
  }
  return [head.join(','), ...lines].join('\n') + '\n'
}

/** The calendar windows the screen asks for: now (one 5-minute bucket from the current minute) and the coming
 * `weeks` weeks (weekly buckets from today 00:00 UTC). */
export function windows(at: Date, weeks: number) {
  const minute = new Date(Math.floor(at.getTime() / 60_000) * 60_000)
  const day = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()))
  const week = 7 * 86_400_000
  return {
    now: { start: minute.toISOString(), end: new Date(minute.getTime() + 300_000).toISOString(), step_s: 300 },
    ahead: { start: day.toISOString(), end: new Date(day.getTime() + weeks * week).toISOString(), step_s: week / 1000 },
    weekStarts: Array.from({ length: weeks }, (_, i) => new Date(day.getTime() + i * week).toISOString()),
  }
}
