import { useMutation, useQueryClient, type QueryKey, type UseMutationResult } from '@tanstack/react-query'
import { useRef, useState, type ChangeEvent, type FormEvent } from 'react'
import { fieldError } from '../components/ProblemAlert'
import { useSubmitOnce } from './useSubmitOnce'

/**
 * A create form's values and its request. The values stay as typed when the request fails (the server's
 * problem+json is `error`; `errorOf(field)` is its message for one field, for that input's `error`); on success
 * the fields named in `clear` (default: all) go back to their initial values, every query under `invalidate`
 * is refetched, `onSuccess(result)` runs and the focus goes back to the form's first field (a keyboard user is
 * ready for the next entry instead of being left on the page's body). `submit` is the form's `onSubmit`: one
 * request at a time, each with a
 * fresh `idempotencyKey` (the second argument of `mutationFn`, for an `Idempotency-Key` header).
 * `text(name, field)` gives a TextInput/Textarea its `value`, `onChange` and the API's `error` for `field`
 * (default: `name`).
 */
export function useCreateForm<V extends object, R = unknown>(initial: V, options: {
  mutationFn: (values: V, idempotencyKey: string) => Promise<R>
  invalidate: QueryKey
  clear?: (keyof V)[]
  onSuccess?: (result: R, values: V) => void
}) {
  const qc = useQueryClient()
  const [values, setValues] = useState<V>(initial)
  const form = useRef<HTMLFormElement | null>(null)
  const mutation: UseMutationResult<R, Error, V> = useMutation<R, Error, V>({
    mutationFn: (v: V): Promise<R> => options.mutationFn(v, once.idempotencyKey.current),
    onSuccess: (result: R, v: V) => {
      const cleared = options.clear ?? (Object.keys(initial) as (keyof V)[])
      setValues((current) => {
        const next = { ...current }
        for (const key of cleared) next[key] = initial[key]
        return next
      })
      void qc.invalidateQueries({ queryKey: options.invalidate })
      options.onSuccess?.(result, v)
      const submitted = form.current
      setTimeout(() => submitted?.querySelector<HTMLElement>(
        'input:not([disabled]):not([type=hidden]), textarea:not([disabled])')?.focus(), 0)
    },
  })
  const once: ReturnType<typeof useSubmitOnce<V>> = useSubmitOnce(mutation)
  const set = <K extends keyof V>(key: K, value: V[K]) => setValues((current) => ({ ...current, [key]: value }))
  const errorOf = (field: string) => fieldError(mutation.error, field)
  return {
    values,
    set,
    setValues,
    mutation,
    error: mutation.error,
    errorOf,
    submit: (event?: FormEvent) => {
      event?.preventDefault()
      if (event?.currentTarget instanceof HTMLFormElement) form.current = event.currentTarget
      once(values)
    },
    text: (name: keyof V & string, field: string = name) => ({
      value: String(values[name] ?? ''),
      onChange: (e: ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) => set(name, e.currentTarget.value as V[typeof name]),
      error: errorOf(field),
    }),
  }
}

export type CreateFormState<V extends object> = ReturnType<typeof useCreateForm<V>>
