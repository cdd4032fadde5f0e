import { afterEach, describe, expect, it } from 'vitest'
import { instancesKey } from './hooks/instances'
import { prefetchInstances, prefetchShell } from './loaders'
import { queryClient } from './queryClient'
import { PROJECT, json, stubApi } from './test/render'

const page = (results: unknown[]) => json({ results, next: null, previous: null })

afterEach(() => queryClient.clear())

describe('route loaders', () => {
  it('start the shell requests together, not the session first', async () => {
    const seen = stubApi({
      'GET /api/v1/session/': () => new Promise<Response>(() => {}), // still unanswered
      'GET /api/v1/me/': () => json({ email: 'a@b.example', staff_role: '' }),
      'GET /api/v1/organizations/': () => page([]),
      'GET /api/v1/projects/': () => page([PROJECT]),
    })
    expect(prefetchShell({ request: new Request('http://localhost/instances') } as never)).toBeNull()
    await expect.poll(() => seen.map((r) => new URL(r.url).pathname).sort()).toEqual(
      ['/api/v1/me/', '/api/v1/organizations/', '/api/v1/projects/', '/api/v1/session/'])
  })

  it("leave the scope's lists out on the admin portal's screens", async () => {
    const seen = stubApi({})
    prefetchShell({ request: new Request('http://localhost/staff/fleet') } as never)
    await expect.poll(() => seen.length).toBe(2)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(seen.map((r) => new URL(r.url).pathname).sort()).toEqual(['/api/v1/me/', '/api/v1/session/'])
  })

  it("put the current project's first page of instances where the instances screen reads it", async () => {
    const instance = { id: 'i1', name: 'vm-0001' }
    const seen = stubApi({
      'GET /api/v1/projects/': () => page([PROJECT]),
      'GET /api/v1/flavors/': () => page([]),
      'GET /api/v1/instances/': () => page([instance]),
    })
    prefetchInstances()
    const key = [...instancesKey(PROJECT.id, {}), '']
    await expect.poll(() => queryClient.getQueryData(key)).toEqual({ results: [instance], next: null, previous: null })
    const list = new URL(seen.find((r) => new URL(r.url).pathname === '/api/v1/instances/')!.url)
    expect(list.searchParams.get('project')).toBe(PROJECT.id)
    expect(list.searchParams.get('page_size')).toBe('20')
  })
})
