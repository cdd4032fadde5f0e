import { MantineProvider } from '@mantine/core'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render } from '@testing-library/react'
import type { ReactNode } from 'react'
import { MemoryRouter, Route, Routes } from 'react-router'
import type { Project } from '../api/client'
import { ScopeContext, type Scope } from '../auth/scope'
import { theme } from '../theme'

export const PROJECT: Project = {
  id: '0190a3b4-0000-7000-8000-000000000001', organization: '0190a3b4-0000-7000-8000-0000000000aa', slug: 'research',
  name: 'Research', description: '', role: 'member', can_write: true, can_manage_members: false, created_at: '2026-12-01T00:00:00Z',
  updated_at: '2026-12-01T00:00:00Z',
}

export function scope(overrides: Partial<Scope> = {}): Scope {
  return {
    organizations: [], projects: [PROJECT], organization: null, project: PROJECT, canWrite: true, loading: false,
    selectProject: () => {}, selectOrganization: () => {}, ...overrides,
  }
}

function testClient(): QueryClient {
  return new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
}

/** Render `ui` as the console would: Mantine, a fresh query client (no retries; or `client`), a router at `path`. */
export function renderPage(ui: ReactNode, { path = '/', route = '*', value = scope(), client = testClient() }: { path?: string; route?: string; value?: Scope; client?: QueryClient } = {}) {
  return render(
    <MantineProvider theme={theme}>
      <QueryClientProvider client={client}>
        <ScopeContext.Provider value={value}>
          <MemoryRouter initialEntries={[path]}>
            <Routes>
              <Route path={route} element={ui} />
              <Route path="*" element={<div data-testid="elsewhere" />} />
            </Routes>
          </MemoryRouter>
        </ScopeContext.Provider>
      </QueryClientProvider>
    </MantineProvider>,
  )
}

type Handler = (request: Request) => Response | Promise<Response>

/** Stub fetch with `routes` ("METHOD /path/" → handler); anything else is a 404 problem. Returns the requests seen. */
export function stubApi(routes: Record<string, Handler>): Request[] {
  const seen: Request[] = []
  globalThis.fetch = (async (input: RequestInfo | URL) => {
    const request = input instanceof Request ? input : new Request(input)
    seen.push(request.clone())
    const key = `${request.method} ${new URL(request.url).pathname}`
    const handler = routes[key]
    if (!handler) return problem(404, 'not_found', `No route ${key}`)
    return handler(request)
  }) as typeof fetch
  return seen
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

export function problem(status: number, code: string, detail: string, errors?: Record<string, unknown>): Response {
  return new Response(JSON.stringify({ type: `about:blank`, title: code, status, detail, code, request_id: 'r', instance: '/', errors }), {
    status,
    headers: { 'Content-Type': 'application/problem+json' },
  })
}
