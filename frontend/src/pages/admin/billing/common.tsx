import { Group, NavLink } from '@mantine/core'
import { Link, useLocation } from 'react-router'
import { useMe } from '../../../auth/staff'
import { BILLING_WRITER } from './logic'

/** The signed-in account's staff role: `staff` (any role reads the billing screens), `writer` (billing admins
 * change them). The server decides either way: a tenant gets 404 from these endpoints, other staff 403 on writes. */
export function useBillingRole() {
  const me = useMe()
  const role = me.data?.staff_role ?? ''
  return { pending: me.isPending, staff: Boolean(role), writer: role === BILLING_WRITER, role }
}

export const READ_ONLY_STAFF = 'Only billing admins change billing; your staff role reads it.'

const TABS = [
  { to: '/staff/billing/price-books', label: 'Price books' },
  { to: '/staff/billing/invoice-runs', label: 'Invoice runs' },
  { to: '/staff/billing/invoices', label: 'Invoices' },
]

/** The billing screens' own tabs (price books, invoice runs, invoices). */
export function BillingTabs() {
  const location = useLocation()
  return (
    <Group gap={4} component="nav" aria-label="Billing administration">
      {TABS.map((t) => {
        const active = location.pathname.startsWith(t.to)
        return (
          <NavLink key={t.to} component={Link} to={t.to} label={t.label} active={active} w="auto"
            aria-current={active ? 'page' : undefined} variant="light" style={{ borderRadius: 4 }} />
        )
      })}
    </Group>
  )
}
