// Every organization, for the admin screens that name or choose one (staff read them all; one request, cached).
import { useQuery } from '@tanstack/react-query'
import { api, unwrap } from '../../api/client'
import { shortId } from '../../shortId'

export function useStaffOrganizations(enabled = true) {
  return useQuery({
    queryKey: ['staff', 'organization-names'], enabled,
    queryFn: () => unwrap(api.GET('/api/v1/organizations/', { params: { query: { page_size: 500 } } })),
    staleTime: 60_000,
  })
}

/** An organization's name from its id (the id's start until the list is in; "—" for none). */
export function useOrgNames(enabled = true): (id: string | null | undefined) => string {
  const orgs = useStaffOrganizations(enabled)
  return (id) => (id ? (orgs.data?.results.find((o) => o.id === id)?.name ?? shortId(id)) : '—')
}
