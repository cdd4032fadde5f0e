import { api, unwrap, type Schemas } from '../api/client'

export type InstanceStatus = Schemas['InstanceOutputStatusEnum']
/** The instances list's filters, as the API's query parameters (none: every instance of the project). */
export type InstanceFilters = { status?: InstanceStatus; name_contains?: string }
/** Rows a page of the instances list shows. */
export const INSTANCES_PAGE_SIZE = 20

/** The instances list's query key (before the cursor `usePaged` appends): a project and its filters. */
export function instancesKey(project: string, filters: InstanceFilters) {
  return ['instances', project, filters] as const
}

/** One page of GET /api/v1/instances/ in `project` with `filters`, from `cursor`. */
export function fetchInstancesPage(project: string, filters: InstanceFilters, cursor?: string) {
  return unwrap(api.GET('/api/v1/instances/', {
    params: { query: { project, cursor, page_size: INSTANCES_PAGE_SIZE, ...filters } },
  }))
}
