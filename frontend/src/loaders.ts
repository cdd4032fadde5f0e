// Route loaders: they start a screen's first requests as the navigation begins, in parallel with its chunk,
// instead of one after the other as components mount (session → scope → screen → list). None waits: a loader
// returns at once and the screens read the same queries from the cache (a request in flight is shared).
import type { LoaderFunctionArgs } from 'react-router'
import { currentProject, isAdminPath, organizationsQuery, projectsQuery } from './auth/scope'
import { sessionQuery } from './auth/session'
import { meQuery } from './auth/staff'
import { flavorsQuery } from './hooks/catalog'
import { fetchInstancesPage, instancesKey } from './hooks/instances'
import { queryClient } from './queryClient'

/** Every signed-in screen: the session, the account and (on a tenant screen) the organizations and projects, all
 * at once. A signed-out visitor's lists answer 403, which the session's answer already explains. */
export function prefetchShell({ request }: LoaderFunctionArgs) {
  void queryClient.prefetchQuery(sessionQuery)
  void queryClient.prefetchQuery(meQuery)
  if (!isAdminPath(new URL(request.url).pathname)) {
    void queryClient.prefetchQuery(organizationsQuery)
    void queryClient.prefetchQuery(projectsQuery)
  }
  return null
}

/** /instances: the first page of the current project's instances (as soon as the projects are known) and the
 * flavors its rows are labelled with. */
export function prefetchInstances() {
  void queryClient.prefetchQuery(flavorsQuery)
  void queryClient
    .ensureQueryData(projectsQuery)
    .then((page) => {
      const project = currentProject(page.results)
      if (!project) return
      void queryClient.prefetchQuery({
        queryKey: [...instancesKey(project.id, {}), ''],
        queryFn: () => fetchInstancesPage(project.id, {}),
      })
    })
    .catch(() => undefined) // signed out or no access: the screens show that from their own queries
  return null
}
