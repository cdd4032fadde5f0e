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

export function useSignIn() {
  const qc = useQueryClient()
  return useMutation({
    mutationFn: async (body: { email: string; password: string; otp_token?: string }) => {
      await qc.ensureQueryData(sessionQuery)
      return unwrap(api.POST('/api/v1/session/', { body: { ...body, otp_token: body.otp_token ?? '' } }))
    },
    onSuccess: (state: Session) => {
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
