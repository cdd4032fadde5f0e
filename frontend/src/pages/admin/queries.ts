// The admin screens' queries that their routes start before the screen's code has loaded (router.tsx loaders):
// the request then runs beside the session check instead of after it.
import { api, unwrap } from '../../api/client'
import { queryClient } from '../../queryClient'
import { windows } from './capacity'

export const fleetKey = ['fleet-summary'] as const
/** Fresh for 10 s: a screen that mounts after its loader's request came back uses that answer instead of asking
 * again (1.7 MB for 2,000 hosts); the heat map refetches every 15 s. */
export const fleetQuery = {
  queryKey: fleetKey, queryFn: () => unwrap(api.GET('/api/v1/fleet/summary/')), staleTime: 10_000,
}

/** Route loader: start the fleet summary (a tenant's or a signed-out visitor's answer is the 404 or 401 the
 * screen shows anyway); never waits, so the route renders at once. */
export function prefetchFleet() {
  void queryClient.prefetchQuery(fleetQuery)
  return null
}

/** Weeks ahead on the capacity screen. */
export const CAPACITY_WEEKS = 4
let capacityWindows: { minute: number; win: ReturnType<typeof windows> } | null = null

/** The capacity screen's calendar windows for the current minute (the loader's and the screen's are the same
 * object, so the screen finds the loader's requests in the cache). */
export function currentCapacityWindows(at: Date = new Date()) {
  const minute = Math.floor(at.getTime() / 60_000)
  if (capacityWindows?.minute !== minute) capacityWindows = { minute, win: windows(at, CAPACITY_WEEKS) }
  return capacityWindows.win
}

export function calendarQuery(key: 'now' | 'ahead', q: { start: string; end: string; step_s: number }) {
  return {
    queryKey: ['capacity', key, q.start], staleTime: 10_000,
    queryFn: () => unwrap(api.GET('/api/v1/capacity/', { params: { query: q } })),
  }
}

/** The capacity screen's fragmentation and on-demand queue figures (staff; tenants 404). */
export const figuresQuery = {
  queryKey: ['capacity', 'fleet-figures'], staleTime: 10_000,
  queryFn: () => unwrap(api.GET('/api/v1/capacity/fleet-figures/')),
}

/** Route loader of the capacity screen: the fleet figures (GPU counts, fragmentation, queue; a few kB, not the
 * heat map's summary) and both calendar windows at once, beside the session check (the calendar is readable by
 * tenants too, without the staff totals; the screen shows them Not found from the fleet figures' 404). */
export function prefetchCapacity() {
  const win = currentCapacityWindows()
  void queryClient.prefetchQuery(calendarQuery('now', win.now))
  void queryClient.prefetchQuery(calendarQuery('ahead', win.ahead))
  void queryClient.prefetchQuery(figuresQuery)
  return null
}
