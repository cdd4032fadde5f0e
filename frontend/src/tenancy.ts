// An organization before its first project: which screens work without one, who may create it, and its slug.
import { matchPath } from 'react-router'

/** The organization's own screens: their lists filter by the organization, so they show before it has a project
 * (the console's other tenant screens need one). */
const ORGANIZATION_PATHS = ['/members', '/api-tokens', '/audit-log', '/billing']

/** Whether the path is one of the organization's screens (`ORGANIZATION_PATHS` and the screens under them). */
export function isOrganizationPath(pathname: string): boolean {
  return ORGANIZATION_PATHS.some((path) => matchPath({ path, end: false }, pathname) !== null)
}

/** Whether an organization role may create a project (the API's `POST /projects/`: owner and admin). */
export function createsProjects(role: string | null | undefined): boolean {
  return role === 'owner' || role === 'admin'
}

/** A project's slug from its name: lower-case ASCII letters and digits joined by single dashes (at most 63). */
export function slugOf(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '')
}
