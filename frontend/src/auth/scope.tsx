// The organization and project the console works in. The choice is kept in localStorage; the lists come from
// /organizations/ and /projects/, and `project.can_write` (the server's answer) decides what is shown disabled.
import { useQuery } from '@tanstack/react-query'
import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from 'react'
import { useLocation } from 'react-router'
import { api, unwrap, type Organization, type Project } from '../api/client'

const STORAGE_KEY = 'gpucloud.project'

export interface Scope {
  organizations: Organization[]
  projects: Project[]
  organization: Organization | null
  project: Project | null
  canWrite: boolean
  loading: boolean
  selectProject: (id: string) => void
  selectOrganization: (id: string) => void
}

export const ScopeContext = createContext<Scope | null>(null)

function stored(): string | null {
  try {
    return window.localStorage.getItem(STORAGE_KEY)
  } catch {
    return null
  }
}

/** Whether the path is one of the admin portal's (`/staff/...`): those work on the provider's fleet, not in a
 * project, so the scope's lists are not fetched there (each admin screen then costs only its own requests). */
export function isAdminPath(pathname: string): boolean {
  return pathname === '/staff' || pathname.startsWith('/staff/')
}

export const organizationsQuery = {
  queryKey: ['organizations'],
  queryFn: () => unwrap(api.GET('/api/v1/organizations/', { params: { query: { page_size: 500 } } })),
  staleTime: 60_000,
}

export const projectsQuery = {
  queryKey: ['projects'],
  queryFn: () => unwrap(api.GET('/api/v1/projects/', { params: { query: { page_size: 500 } } })),
  staleTime: 60_000,
}

/** The project the console works in: the one chosen before (kept in localStorage) if still listed, else the first. */
export function currentProject(projects: Project[], chosen: string | null = stored()): Project | null {
  return projects.find((p) => p.id === chosen) ?? projects[0] ?? null
}

export function ScopeProvider({ children }: { children: ReactNode }) {
  const tenantScreen = !isAdminPath(useLocation().pathname)
  const orgs = useQuery({ ...organizationsQuery, enabled: tenantScreen })
  const projects = useQuery({ ...projectsQuery, enabled: tenantScreen })
  const [chosen, setChosen] = useState<string | null>(stored)

  const selectProject = useCallback((id: string) => {
    setChosen(id)
    try {
      window.localStorage.setItem(STORAGE_KEY, id)
    } catch {
      /* private mode: the choice lasts for this tab */
    }
  }, [])

  const value = useMemo<Scope>(() => {
    const organizations = orgs.data?.results ?? []
    const allProjects = projects.data?.results ?? []
    const project = currentProject(allProjects, chosen)
    const organization =
      organizations.find((o) => o.id === project?.organization) ?? organizations[0] ?? null
    return {
      organizations,
      projects: allProjects,
      organization,
      project,
      canWrite: Boolean(project?.can_write),
      loading: orgs.isPending || projects.isPending,
      selectProject,
      selectOrganization: (id: string) => {
        const first = allProjects.find((p) => p.organization === id)
        if (first) selectProject(first.id)
      },
    }
  }, [orgs.data, orgs.isPending, projects.data, projects.isPending, chosen, selectProject])

  return <ScopeContext.Provider value={value}>{children}</ScopeContext.Provider>
}

export function useScope(): Scope {
  const scope = useContext(ScopeContext)
  if (!scope) throw new Error('useScope outside ScopeProvider')
  return scope
}
