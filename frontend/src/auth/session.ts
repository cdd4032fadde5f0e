import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap, type Session } from '../api/client'

export const sessionKey = ['session'] as const

/** GET /api/v1/session/: whether the browser is signed in (and sets the CSRF cookie). */
export const sessionQuery = {
  queryKey: sessionKey,
  queryFn: () => unwrap(api.GET('/api/v1/session/')),
  staleTime: 60_000,
}

export function useSession() {
  return useQuery(sessionQuery)
}

/** Whether the console is signed in now, from the cached session (asks nothing: the shell keeps it current). */
export function useSignedInNow(): boolean {
  const { data } = useQuery({ ...sessionQuery, enabled: false })
  return Boolean(data?.authenticated && !data.second_factor_needed)
}

/**
 * POST /api/v1/session/. The person whose session ended (`signedInBefore`, else the cached session's e-mail) signing
 * in again keeps the console's cache (refetched), so the screen under the sign-in dialog stays as it was; anyone
 * else starts from an empty cache.
 */
export function useSignIn(signedInBefore?: string | null) {
  const qc = useQueryClient()
  return useMutation({
    mutationFn: (body: { email: string; password: string; otp_token?: string }) =>
      unwrap(api.POST('/api/v1/session/', { body: { ...body, otp_token: body.otp_token ?? '' } })),
    onSuccess: (state: Session) => {
      const before = signedInBefore ?? qc.getQueryData<Session>(sessionKey)?.email
      if (before && state.email && before.toLowerCase() === state.email.toLowerCase()) {
        qc.setQueryData(sessionKey, state)
        void qc.invalidateQueries({ predicate: (q) => q.queryKey[0] !== sessionKey[0] })
        return
      }
      qc.clear()
      qc.setQueryData(sessionKey, state)
    },
  })
}

export function useVerifyOtp() {
  const qc = useQueryClient()
  return useMutation({
    mutationFn: (otp_token: string) => unwrap(api.POST('/api/v1/session/otp/', { body: { otp_token } })),
    onSuccess: (state: Session) => qc.setQueryData(sessionKey, state),
  })
}

export function useSignOut() {
  const qc = useQueryClient()
  return useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/session/')),
    onSettled: () => {
      qc.clear()
      void qc.invalidateQueries({ queryKey: sessionKey })
    },
  })
}
