import { describe, expect, it } from 'vitest'
import { api, unwrap, type Session } from './api/client'
import { sessionKey } from './auth/session'
import { createQueryClient } from './queryClient'
import { problem, stubApi } from './test/render'

describe('the query client', () => {
  it('turns the cached session anonymous when any call answers not_authenticated (signed out in another tab)', async () => {
    stubApi({
      'POST /api/v1/leases/': () => problem(403, 'not_authenticated', 'Authentication credentials were not provided.'),
    })
    const client = createQueryClient()
    client.setQueryData(sessionKey, { authenticated: true, second_factor_needed: false } as unknown as Session)
    const mutation = client.getMutationCache().build(client, {
      mutationFn: () => unwrap(api.POST('/api/v1/leases/', { body: {} as never })),
    })
    await mutation.execute(undefined).catch(() => {})
    expect(client.getQueryData<Session>(sessionKey)?.authenticated).toBe(false)
  })

  it('leaves the session alone on other refusals', async () => {
    stubApi({ 'POST /api/v1/leases/': () => problem(403, 'permission_denied', 'No.') })
    const client = createQueryClient()
    client.setQueryData(sessionKey, { authenticated: true } as unknown as Session)
    const mutation = client.getMutationCache().build(client, {
      mutationFn: () => unwrap(api.POST('/api/v1/leases/', { body: {} as never })),
    })
    await mutation.execute(undefined).catch(() => {})
    expect(client.getQueryData<Session>(sessionKey)?.authenticated).toBe(true)
  })
})
