import { useDebouncedValue } from '@mantine/hooks'
import { useEffect, useState } from 'react'
import { useSearchParams } from 'react-router'

export type FilterValues = Record<string, string | null>

/**
 * A list's filters, named by the API's query parameters (`status`, `name_contains`, ...; a value's type is the
 * parameter's, e.g. `null as Status | null`): `values` as the controls show them, `query` the non-empty ones as sent (typing is debounced by `delay` ms, so a name search asks once the
 * typing pauses; 0 applies each change at once), `active` whether any differs from `initial`, `clear()` back to `initial`. Put `query` into the
 * list's query key (a `usePaged` list goes back to its first page when its key changes).
 *
 * The applied filters live in the page's URL too (`?status=active&name_contains=web`; each name after `urlPrefix`,
 * for two lists on one page), replacing the history entry rather than adding one: a filtered list can be linked
 * and reloaded, and Back leaves the page instead of undoing keystrokes. A value the URL holds is where the filters
 * start.
 */
export function useListFilters<F extends FilterValues>(initial: F, delay = 300, urlPrefix = '') {
  const [params, setParams] = useSearchParams()
  const [values, setValues] = useState<F>(() => {
    const start = { ...initial }
    for (const key of Object.keys(initial)) {
      const v = params.get(urlPrefix + key)
      if (v !== null) (start as FilterValues)[key] = v
    }
    return start
  })
  const [debounced] = useDebouncedValue(values, delay)
  const applied = delay <= 0 || clearedNow(values, initial) ? values : debounced
  const wanted = JSON.stringify(applied)
  useEffect(() => {
    const next = new URLSearchParams(params)
    for (const key of Object.keys(initial)) {
      const v = applied[key]
      const text = typeof v === 'string' ? v.trim() : v
      if (text && text !== (initial[key] ?? '')) next.set(urlPrefix + key, text)
      else next.delete(urlPrefix + key)
    }
    // only a real change navigates (a navigation runs the route's loaders again)
    if (next.toString() !== params.toString()) setParams(next, { replace: true })
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [wanted])
  const query: { [K in keyof F]?: NonNullable<F[K]> } = {}
  for (const [key, value] of Object.entries(applied)) {
    const v = typeof value === 'string' ? value.trim() : value
    if (v) query[key as keyof F] = v as NonNullable<F[keyof F]>
  }
  return {
    values,
    query,
    active: Object.keys(initial).some((key) => (values[key] ?? '') !== (initial[key] ?? '')),
    set: (key: keyof F, value: string | null) => setValues((current) => ({ ...current, [key]: value })),
    clear: () => setValues(initial),
  }
}

/**
 * A screen's tab, kept in its URL the way `useListFilters` keeps a list's filters (`?tab=security-groups`; the
 * history entry is replaced and the first tab is left out of the URL): a reload, a link, or Back to the screen opens
 * the tab that was shown. `tabs` are the tabs' values, the first one the default; a value the URL holds that is not
 * one of them opens the first. Returns the tab and its setter (for Mantine `Tabs`' `value` and `onChange`).
 */
export function useUrlTab<T extends string>(tabs: readonly [T, ...T[]], name = 'tab'): [T, (tab: string | null) => void] {
  const filters = useListFilters<FilterValues>({ [name]: tabs[0] }, 0)
  const value = filters.values[name]
  const tab = tabs.find((t) => t === value) ?? tabs[0]
  return [tab, (next) => filters.set(name, next ?? tabs[0])]
}

export type ListFilters<F extends FilterValues = FilterValues> = ReturnType<typeof useListFilters<F>>

/** What a filter control needs of `useListFilters` (any filters). */
export interface FilterControl {
  values: FilterValues
  set(key: string, value: string | null): void
}

/** A clear (every value back to the initial one) applies at once, without waiting for the debounce. */
function clearedNow(values: FilterValues, initial: FilterValues): boolean {
  return Object.keys(initial).every((key) => (values[key] ?? '') === (initial[key] ?? ''))
}
