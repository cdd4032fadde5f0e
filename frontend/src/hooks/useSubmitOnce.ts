import type { UseMutationResult } from '@tanstack/react-query'
import { useRef } from 'react'

/**
 * Submit a create form's mutation at most once at a time.
 *
 * `isPending` (which drives the submit button's `loading`) only turns true after a re-render, so the second click of
 * a double click would otherwise start a second request (two leases, two tokens, or a misleading "exists" error).
 * Returns `submit(variables)`: a call while the previous one is in flight is ignored. `submit.idempotencyKey.current`
 * is a fresh UUID per submission, for the mutation to send as `Idempotency-Key` where the endpoint takes one.
 */
export function useSubmitOnce<TVariables>(mutation: UseMutationResult<unknown, unknown, TVariables, unknown>) {
  const inFlight = useRef(false)
  const idempotencyKey = useRef('')
  const submit = (variables: TVariables) => {
    if (inFlight.current) return
    inFlight.current = true
    idempotencyKey.current = crypto.randomUUID()
    mutation.mutate(variables, { onSettled: () => { inFlight.current = false } })
  }
  return Object.assign(submit, { idempotencyKey })
}
