import { useMutation, useQueryClient, type QueryKey } from '@tanstack/react-query'

/**
 * A delete (or revoke, release, cancel) of one row: `fn(key)` runs the request; on success every query under
 * `queryKey` (one key, or several) is refetched and `onSuccess(key)` runs. The mutation's `error` is the
 * problem+json to show; `isRemoving(key)` is true while that row's request is in flight (its button's `loading`).
 */
export function useRemove<K = string>(fn: (key: K) => Promise<unknown>, queryKey: QueryKey | QueryKey[],
  onSuccess?: (key: K) => void) {
  const qc = useQueryClient()
  const keys: QueryKey[] = Array.isArray(queryKey[0]) ? (queryKey as QueryKey[]) : [queryKey as QueryKey]
  const mutation = useMutation({
    mutationFn: fn,
    onSuccess: (_, key) => {
      onSuccess?.(key)
      for (const k of keys) void qc.invalidateQueries({ queryKey: k })
    },
  })
  return Object.assign(mutation, {
    isRemoving: (key: K) => mutation.isPending && mutation.variables === key,
  })
}

export type Remove<K = string> = ReturnType<typeof useRemove<K>>
