const TWO_DIGITS = Array.from({ length: 100 }, (_, n) => String(n).padStart(2, '0'));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));
const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00.000Z: from there on `toISOString` writes six-digit years with a sign. */
const FOUR_DIGIT_YEARS_END = 253_402_300_800_000;

/**
 * `new Date(epochMs).toISOString()` written out by arithmetic: a list page formats three instants per article, and
 * the Date round trip cost about 1.5 µs each against 0.3 µs here (Node 24, one million random instants). The day
 * number becomes a civil date by Howard Hinnant's `civil_from_days` (proleptic Gregorian calendar, eras of 400
 * years). Anything outside 1970 to 9999, or not a whole millisecond, goes to Date, which formats it the same way.
 */
export function toIso(epochMs: number): string {
  if (!(epochMs >= 0 && epochMs < FOUR_DIGIT_YEARS_END && Number.isInteger(epochMs))) return new Date(epochMs).toISOString();
  const days = Math.floor(epochMs / DAY_MS);
  let rest = epochMs - days * DAY_MS;
  // Days since 0000-03-01, so that the leap day is the last day of its year.
  const sinceMarchEpoch = days + 719_468;
  const era = Math.floor(sinceMarchEpoch / 146_097);
  const dayOfEra = sinceMarchEpoch - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1;
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const milliseconds = rest - seconds * 1000;
  return `${TWO_DIGITS[Math.floor(year / 100)]}${TWO_DIGITS[year % 100]}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]}T${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${THREE_DIGITS[milliseconds]}Z`;
}
