// The admin screens' queries that their routes start before the screen's code has loaded (router.tsx loaders):
// the request then runs beside the session check instead of after it.
import { api, unwrap } from '../../api/client'
import { queryClient } from '../../queryClient'

export const fleetKey = ['fleet-summary'] as const
export const fleetQuery = { queryKey: fleetKey, queryFn: () => unwrap(api.GET('/api/v1/fleet/summary/')) }

/** Route loader: start the fleet summary (a tenant's or a signed-out visitor's answer is the 404 or 401 the
 * screen shows anyway); never waits, so the route renders at once. */
export function prefetchFleet() {
  void queryClient.prefetchQuery(fleetQuery)
  return null
}
