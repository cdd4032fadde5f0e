import { useQuery } from '@tanstack/react-query'
import { api, unwrap } from '../api/client'

/** GET /api/v1/me/: the signed-in account; a non-empty `staff_role` (operator, billing_admin, support) is provider
 * staff, for whom the console shows its Admin section. The server decides: the admin endpoints answer anyone else
 * 404 whatever the console shows. */
export const meQuery = {
  queryKey: ['me'],
  queryFn: () => unwrap(api.GET('/api/v1/me/')),
  staleTime: 60_000,
}

export function useMe() {
  return useQuery(meQuery)
}

export function useIsStaff(): boolean {
  return Boolean(useMe().data?.staff_role)
}
