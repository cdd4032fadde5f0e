import { MutationCache, QueryCache, QueryClient } from '@tanstack/react-query'
import { ApiError, type Session } from './api/client'
import { sessionKey } from './auth/session'

/** Whether `error` says the browser is no longer signed in (401, or DRF's 403 `not_authenticated` for a session). */
export function isSignedOut(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 401 || error.code === 'not_authenticated')
}

/**
 * A query client whose every query and mutation treats a signed-out answer the same way: the cached session turns
 * anonymous, so the signed-in screens (and the header's user) give way to /sign-in?next=… (signed out in another
 * tab, or the session expired) instead of showing "Authentication credentials were not provided." in a form.
 */
export function createQueryClient(): QueryClient {
  const signedOut = (error: unknown) => {
    if (!isSignedOut(error)) return
    client.setQueryData<Session>(sessionKey, (s) => (s ? { ...s, authenticated: false } : s))
  }
  const client: QueryClient = new QueryClient({
    queryCache: new QueryCache({ onError: signedOut }),
    mutationCache: new MutationCache({ onError: signedOut }),
    defaultOptions: {
      queries: {
        // a 4xx (not found, forbidden, signed out) is an answer, not a glitch: show it at once
        retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
        refetchOnWindowFocus: true,
      },
    },
  })
  return client
}

/** The console's one query cache (main.tsx provides it; route loaders prefetch into it). */
export const queryClient = createQueryClient()
