import { Alert, Anchor, Badge, Button, Checkbox, Code, Group, List, Modal, Paper, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useMemo, useState } from 'react'
import { ApiError, api, unwrap } from '../../../api/client'
import { ProblemAlert, fieldError } from '../../../components/ProblemAlert'
import { WriteButton } from '../../../components/WriteButton'
import { money } from '../../../hooks/billing'
import { useSubmitOnce } from '../../../hooks/useSubmitOnce'
import { NotFoundPage } from '../../NotFound'
import { BillingTabs, READ_ONLY_STAFF, useBillingRole } from './common'
import {
  bookState, changedPrices, freePrices, localInputToUtc, nextMonthStart, priceBefore, priceKey, priceRows, type PriceBook, type PriceRow,
} from './logic'

const booksKey = ['staff', 'price-books'] as const

async function allBooks(): Promise<PriceBook[]> {
  const out: PriceBook[] = []
  let cursor: string | undefined
  for (let i = 0; i < 20; i++) {
    const page = await unwrap(api.GET('/api/v1/price-books/', { params: { query: { cursor, page_size: 200 } } }))
    out.push(...page.results)
    const next = page.next ? new URL(page.next, 'http://x').searchParams.get('cursor') : null
    if (!next) break
    cursor = next
  }
  return out
}

const STATE_COLORS = { scheduled: 'blue.8', 'in force': 'teal.9', superseded: 'gray.7' } as const

/** The form of a new version: currency and start (the 1st of next month by default), and each price in force
 * before it beside the new one; only changed prices go into the book (the rest stay in force). */
function NewVersion({ books, onClose }: { books: PriceBook[]; onClose: () => void }) {
  const qc = useQueryClient()
  const currencies = [...new Set(books.map((b) => b.currency))].sort()
  const [currency, setCurrency] = useState(currencies[0] ?? 'USD')
  const [start, setStart] = useState(nextMonthStart().slice(0, 16))
  const [name, setName] = useState(`List prices from ${nextMonthStart().slice(0, 7)}`)
  const at = localInputToUtc(start)
  const base = useMemo(() => priceRows(books, currency, at || nextMonthStart()), [books, currency, at])
  const [edits, setEdits] = useState<Record<string, string>>({})
  const rows: PriceRow[] = base.map((r) => ({ ...r, next: edits[r.key] ?? r.next }))
  const free = freePrices(rows)
  const freeKeys = free.map(priceKey).join(' ')
  // the confirmation holds for the free prices it was given for: another free price asks again
  const [freeConfirmed, setFreeConfirmed] = useState('')
  const publish = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/price-books/', {
      body: { name, currency, effective_from: at, prices: changedPrices(rows) } as never,
    })),
    onSuccess: () => { void qc.invalidateQueries({ queryKey: booksKey }); onClose() },
  })
  const submit = useSubmitOnce(publish)
  const changed = changedPrices(rows).length
  const priceError = (n: number) => {
    const e = publish.error instanceof ApiError ? publish.error.errors : {}
    return Object.entries(e).filter(([k]) => k.startsWith(`prices.${n}.`) || k === `prices.${n}`).map(([, v]) => v.join(' ')).join(' ') || undefined
  }
  const changedKeys = changedPrices(rows).map(priceKey)
  return (
    <form onSubmit={(e) => { e.preventDefault(); if (!free.length || freeConfirmed === freeKeys) submit(undefined) }}>
      <Stack>
        <Group align="start" grow>
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)}
            error={fieldError(publish.error, 'name')} />
          <Select label="Currency" data={currencies.length ? currencies : ['USD']} value={currency} allowDeselect={false}
            onChange={(v) => { setCurrency(v ?? 'USD'); setEdits({}) }} error={fieldError(publish.error, 'currency')} />
          <TextInput label="Starts (UTC)" type="datetime-local" required value={start}
            onChange={(e) => setStart(e.currentTarget.value)} error={fieldError(publish.error, 'effective_from')}
            min={currencies.includes(currency) ? new Date().toISOString().slice(0, 16) : undefined}
            description={currencies.includes(currency) ? 'The instant the new prices apply from: after now.'
              : 'The instant the new prices apply from.'} data-testid="effective-from" />
        </Group>
        <Table striped withTableBorder aria-label="Prices of the new version" data-testid="price-rows">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>SKU</Table.Th><Table.Th>Tier</Table.Th><Table.Th>Model</Table.Th>
              <Table.Th ta="right">Now</Table.Th><Table.Th ta="right">From the start</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((r) => {
              const n = changedKeys.indexOf(r.key)
              return (
                <Table.Tr key={r.key} data-testid="price-row" data-sku={r.sku} data-tier={r.sla_tier}>
                  <Table.Td><Code>{r.sku}</Code></Table.Td>
                  <Table.Td>{r.sla_tier}</Table.Td>
                  <Table.Td>{r.pricing_model.replace('_', '-')}</Table.Td>
                  <Table.Td ta="right">{r.old ? `${money(r.old, currency, 6)} / ${r.unit}` : '—'}</Table.Td>
                  <Table.Td ta="right">
                    <TextInput size="xs" w={120} ml="auto" inputMode="decimal" value={r.next}
                      aria-label={`New price of ${r.sku} (${r.sla_tier}, ${r.pricing_model})`}
                      onChange={(e) => { const v = e.currentTarget.value; setEdits((x) => ({ ...x, [r.key]: v })) }}
                      error={n >= 0 ? priceError(n) : undefined} />
                  </Table.Td>
                </Table.Tr>
              )
            })}
          </Table.Tbody>
        </Table>
        {rows.length === 0 && <Text size="sm" c="dimmed">No price of {currency} is in force before that start.</Text>}
        <Text size="sm" data-testid="changed-count">{changed} price{changed === 1 ? '' : 's'} change; the others stay in force.</Text>
        {free.length > 0 && (
          <Alert color="yellow" variant="light" data-testid="free-prices"
            title={<Text fw={700} c="var(--mantine-color-text)">{free.length === 1 ? 'One price is 0' : `${free.length} prices are 0`}</Text>}>
            <Stack gap="xs">
              <Text size="sm">From the start, customers are not charged for:</Text>
              <List size="sm">
                {free.map((p) => <List.Item key={priceKey(p)}><Code>{p.sku}</Code> ({p.sla_tier}, {p.pricing_model.replace('_', '-')})</List.Item>)}
              </List>
              <Checkbox label={free.length === 1 ? 'It is free on purpose' : 'They are free on purpose'}
                checked={freeConfirmed === freeKeys} onChange={(e) => setFreeConfirmed(e.currentTarget.checked ? freeKeys : '')} />
            </Stack>
          </Alert>
        )}
        <ProblemAlert error={publish.error} shownFields={['name', 'currency', 'effective_from',
          ...Object.keys(publish.error instanceof ApiError ? publish.error.errors : {}).filter((k) => k.startsWith('prices.'))]} />
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>Cancel</Button>
          <Button type="submit" loading={publish.isPending}
            disabled={changed === 0 || (free.length > 0 && freeConfirmed !== freeKeys)}>Publish version</Button>
        </Group>
      </Stack>
    </form>
  )
}

/** `/staff/billing/price-books`: every price book (version) by currency and start, with its prices and the price
 * each replaces; billing admins publish a new version. */
export function AdminPriceBooksPage() {
  const role = useBillingRole()
  const books = useQuery({ queryKey: booksKey, queryFn: allBooks, enabled: role.staff })
  const [open, setOpen] = useState(false)
  const [shown, setShown] = useState<string | null>(null)
  if (role.pending) return null
  if (!role.staff || (books.error instanceof ApiError && books.error.status === 404)) return <NotFoundPage />
  const list = [...(books.data ?? [])].sort((a, b) => a.currency.localeCompare(b.currency)
    || new Date(b.effective_from).getTime() - new Date(a.effective_from).getTime())
  const book = list.find((b) => b.id === shown)
  return (
    <Stack>
      <Title order={2}>Billing: price books</Title>
      <BillingTabs />
      <Group justify="space-between">
        <Text size="sm" c="dimmed" maw={720}>
          Each book is a version of a currency’s price list from its start; a key’s price comes from the latest book
          that starts before the moment and lists it. To change prices, publish a new version.
        </Text>
        <WriteButton allowed={role.writer} deniedHint={READ_ONLY_STAFF} onClick={() => setOpen(true)}
          disabled={!books.data}>New version</WriteButton>
      </Group>
      <ProblemAlert error={books.error} />
      <Table striped withTableBorder aria-label="Price books">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Name</Table.Th><Table.Th>Currency</Table.Th><Table.Th>Starts</Table.Th>
            <Table.Th>State</Table.Th><Table.Th ta="right">Prices</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {list.map((b) => {
            const state = bookState(b, list)
            return (
              <Table.Tr key={b.id} data-testid="price-book" data-name={b.name}>
                <Table.Td>
                  <Anchor component="button" type="button" size="sm" c="indigo.9" onClick={() => setShown(b.id === shown ? null : b.id)}
                    aria-expanded={b.id === shown}>{b.name}</Anchor>
                </Table.Td>
                <Table.Td>{b.currency}</Table.Td>
                <Table.Td>{b.effective_from.replace('T', ' ').replace(/:00(\.0+)?Z$/, ' UTC').replace('Z', ' UTC')}</Table.Td>
                <Table.Td><Badge color={STATE_COLORS[state]} variant="filled">{state}</Badge></Table.Td>
                <Table.Td ta="right">{b.prices.length}</Table.Td>
              </Table.Tr>
            )
          })}
        </Table.Tbody>
      </Table>
      {book && (
        <Paper withBorder p="md" component="section" aria-labelledby="book-title" data-testid="price-book-detail">
          <Stack gap="sm">
            <Title order={3} size="h4" id="book-title">{book.name} ({book.currency}, from {book.effective_from.slice(0, 10)})</Title>
            <Table striped aria-label={`Prices of ${book.name}`}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>SKU</Table.Th><Table.Th>Tier</Table.Th><Table.Th>Model</Table.Th>
                  <Table.Th ta="right">Before</Table.Th><Table.Th ta="right">This book</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {book.prices.map((p) => {
                  const before = priceBefore(list, book.currency, priceKey(p), book.effective_from)
                  return (
                    <Table.Tr key={p.id} data-testid="book-price" data-sku={p.sku}>
                      <Table.Td><Code>{p.sku}</Code></Table.Td>
                      <Table.Td>{p.sla_tier}</Table.Td>
                      <Table.Td>{p.pricing_model.replace('_', '-')}</Table.Td>
                      <Table.Td ta="right">{before ? money(before.unit_price, book.currency, 6) : '—'}</Table.Td>
                      <Table.Td ta="right">{money(p.unit_price, book.currency, 6)} / {p.unit}</Table.Td>
                    </Table.Tr>
                  )
                })}
              </Table.Tbody>
            </Table>
          </Stack>
        </Paper>
      )}
      <Modal opened={open} onClose={() => setOpen(false)} title="New price book version" size="xl" centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        {books.data && <NewVersion books={books.data} onClose={() => setOpen(false)} />}
      </Modal>
    </Stack>
  )
}
