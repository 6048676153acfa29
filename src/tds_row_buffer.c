/*-------------------------------------------------------------------------
 *
 * tds_row_buffer.c
 *		A result's rows kept as raw column bytes (see tds_row_buffer.h).
 *
 * The bytes are db-lib's, copied as tds_col_data returns them (character
 * data already in the client charset), so that converting a kept row runs
 * exactly the conversion of the live row: tds_value_to_datum over the
 * same type code, bytes and length.  Each value starts at a MAXALIGN'd
 * offset, as a live column's bytes may be read through any type.
 *
 * IDENTIFICATION
 *		src/tds_row_buffer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "tds_convert.h"
#include "tds_row_buffer.h"
#include "tds_session_internal.h"

struct TdsRowBuffer
{
	MemoryContext cxt;
	Size		budget;
	int			ncols;			/* of the result the rows came from; 0: none yet */
	int		   *types;			/* per column, its db-lib type code */
	const uint8 **row_data;		/* per column, the current row's (add) */
	int		   *row_lens;
	int			nrows;
	int			caprows;
	Size	   *offsets;		/* nrows x ncols, into data */
	int		   *lens;			/* nrows x ncols; -1: NULL */
	char	   *data;
	Size		used;
	Size		cap;
};

TdsRowBuffer *
tds_row_buffer_create(MemoryContext cxt, Size budget)
{
	TdsRowBuffer *buf = MemoryContextAllocZero(cxt, sizeof(TdsRowBuffer));

	buf->cxt = cxt;
	buf->budget = budget;
	return buf;
}

/* Room for one more row of ncols values, together at most need bytes */
static void
reserve(TdsRowBuffer *buf, Size need)
{
	if (buf->nrows == buf->caprows)
	{
		buf->caprows = Max(buf->caprows * 2, 256);
		buf->offsets = buf->offsets
			? repalloc(buf->offsets, sizeof(Size) * buf->caprows * buf->ncols)
			: MemoryContextAlloc(buf->cxt, sizeof(Size) * buf->caprows * buf->ncols);
		buf->lens = buf->lens
			? repalloc(buf->lens, sizeof(int) * buf->caprows * buf->ncols)
			: MemoryContextAlloc(buf->cxt, sizeof(int) * buf->caprows * buf->ncols);
	}
	if (buf->used + need > buf->cap)
	{
		buf->cap = Max(buf->cap * 2, Max(buf->used + need, 64 * 1024));
		buf->data = buf->data ? repalloc_huge(buf->data, buf->cap)
			: MemoryContextAllocHuge(buf->cxt, buf->cap);
	}
}

bool
tds_row_buffer_add(TdsRowBuffer *buf, TdsSession *session)
{
	int			ncols = tds_num_cols(session);
	const uint8 **data;
	int		   *lens;
	Size		need = 0;
	int			c;

	if (buf->ncols == 0)
	{
		/* the first row fixes the shape: every later row is of the same result */
		buf->ncols = ncols;
		buf->types = MemoryContextAlloc(buf->cxt, sizeof(int) * Max(ncols, 1));
		buf->row_data = MemoryContextAlloc(buf->cxt, sizeof(uint8 *) * Max(ncols, 1));
		buf->row_lens = MemoryContextAlloc(buf->cxt, sizeof(int) * Max(ncols, 1));
		for (c = 0; c < ncols; c++)
			buf->types[c] = tds_col_type(session, c + 1);
	}
	else if (ncols != buf->ncols)
		elog(ERROR, "rows of two results in one row buffer");
	data = buf->row_data;
	lens = buf->row_lens;

	for (c = 0; c < ncols; c++)
	{
		data[c] = tds_col_data(session, c + 1, &lens[c]);
		if (data[c] != NULL)
			need += MAXALIGN(lens[c]);
	}
	reserve(buf, need);
	for (c = 0; c < ncols; c++)
	{
		Size		i = (Size) buf->nrows * ncols + c;

		if (data[c] == NULL)
		{
			buf->lens[i] = -1;
			continue;
		}
		buf->offsets[i] = buf->used;
		buf->lens[i] = lens[c];
		memcpy(buf->data + buf->used, data[c], lens[c]);
		buf->used += MAXALIGN(lens[c]);
	}
	buf->nrows++;
	return buf->used + (Size) buf->nrows * ncols * (sizeof(Size) + sizeof(int)) < buf->budget;
}

int
tds_row_buffer_rows(const TdsRowBuffer *buf)
{
	return buf->nrows;
}

Datum
tds_row_buffer_datum(const TdsRowBuffer *buf, TdsSession *session, int row, int col,
					 const struct TdsDatumTarget *target, bool *isnull)
{
	Size		i;

	if (row < 0 || row >= buf->nrows || col < 1 || col > buf->ncols)
		elog(ERROR, "kept row %d column %d out of range", row, col);
	i = (Size) row * buf->ncols + col - 1;
	if (buf->lens[i] < 0)
		return tds_value_to_datum(session->dbproc, buf->types[col - 1], NULL, 0, target,
								  isnull);
	return tds_value_to_datum(session->dbproc, buf->types[col - 1],
							  (const uint8 *) buf->data + buf->offsets[i], buf->lens[i],
							  target, isnull);
}
