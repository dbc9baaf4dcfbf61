import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toIso } from '../src/iso-time.js';

describe('toIso', () => {
  it('writes every instant exactly as Date.prototype.toISOString does', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62_198_755_200_000, max: 8_640_000_000_000_000 }), (epochMs) => {
        expect(toIso(epochMs)).toBe(new Date(epochMs).toISOString());
      }),
      { numRuns: 20_000 },
    );
  });

  it('gets the calendar edges right: leap days, century years, the ends of its arithmetic range', () => {
    const instants = [
      '1970-01-01T00:00:00.000Z',
      '1999-12-31T23:59:59.999Z',
      '2000-02-29T12:00:00.001Z',
      '2000-03-01T00:00:00.000Z',
      '2100-02-28T23:59:59.999Z',
      '2100-03-01T00:00:00.000Z',
      '2400-02-29T00:00:00.000Z',
      '9999-12-31T23:59:59.999Z',
      '+010000-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
    ];
    for (const instant of instants) expect(toIso(Date.parse(instant))).toBe(instant);
  });

  it('leaves a fraction of a millisecond to Date, which truncates it', () => {
    expect(toIso(1.5)).toBe(new Date(1.5).toISOString());
  });
});
