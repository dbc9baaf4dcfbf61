import { type CreateTableBuilder, type Kysely, sql } from 'kysely';
import type { Dialect } from '../index.js';

/** The one place where the two dialects spell an auto-incrementing key differently. */
function withId<T extends string>(table: CreateTableBuilder<T, never>, dialect: Dialect) {
  return table.addColumn('id', 'integer', (column) =>
    dialect === 'sqlite'
      ? column.primaryKey().autoIncrement() // AUTOINCREMENT: ids of deleted rows are never handed out again
      : column.primaryKey().generatedByDefaultAsIdentity(),
  );
}

export function initialSchema(dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>) {
      await withId(db.schema.createTable('users'), dialect)
        .addColumn('username', 'text', (c) => c.notNull())
        .addColumn('username_key', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('email_key', 'text', (c) => c.notNull())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('bio', 'text')
        .addColumn('image', 'text')
        .addColumn('token_version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('kept_session', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        // Named so that a violation maps to the right field of the 409 body (see db/constraints.ts).
        .addUniqueConstraint('users_username_key_unique', ['username_key'])
        .addUniqueConstraint('users_email_key_unique', ['email_key'])
        .execute();

      await db.schema
        .createTable('follows')
        .addColumn('follower_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('followed_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('follows_pk', ['follower_id', 'followed_id'])
        .addCheckConstraint('follows_not_self', sql`follower_id <> followed_id`)
        .execute();
      // The primary key serves "whom do I follow" (feed); this serves cascades and "who follows X".
      await db.schema.createIndex('follows_followed_idx').on('follows').columns(['followed_id', 'follower_id']).execute();

      await withId(db.schema.createTable('articles'), dialect)
        .addColumn('slug', 'text', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('description', 'text', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('author_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('favorites_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('articles_slug_unique', ['slug'])
        .execute();
      // Lists are newest first with id as tie-breaker; the author index also serves the feed and the cascade.
      await db.schema.createIndex('articles_created_idx').on('articles').columns(['created_at', 'id']).execute();
      await db.schema.createIndex('articles_author_created_idx').on('articles').columns(['author_id', 'created_at', 'id']).execute();

      await withId(db.schema.createTable('tags'), dialect)
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('article_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addUniqueConstraint('tags_name_unique', ['name'])
        .execute();
      await db.schema.createIndex('tags_popularity_idx').on('tags').columns(['article_count', 'name']).execute();

      await db.schema
        .createTable('article_tags')
        .addColumn('article_id', 'integer', (c) => c.notNull().references('articles.id').onDelete('cascade'))
        .addColumn('tag_id', 'integer', (c) => c.notNull().references('tags.id').onDelete('cascade'))
        .addPrimaryKeyConstraint('article_tags_pk', ['article_id', 'tag_id'])
        .execute();
      await db.schema.createIndex('article_tags_tag_idx').on('article_tags').columns(['tag_id', 'article_id']).execute();

      await db.schema
        .createTable('favorites')
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('article_id', 'integer', (c) => c.notNull().references('articles.id').onDelete('cascade'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('favorites_pk', ['user_id', 'article_id'])
        .execute();
      await db.schema.createIndex('favorites_article_idx').on('favorites').columns(['article_id', 'user_id']).execute();

      await withId(db.schema.createTable('comments'), dialect)
        .addColumn('article_id', 'integer', (c) => c.notNull().references('articles.id').onDelete('cascade'))
        .addColumn('author_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('comments_article_idx').on('comments').columns(['article_id', 'id']).execute();
      await db.schema.createIndex('comments_author_idx').on('comments').columns(['author_id']).execute();
    },

    async down(db: Kysely<unknown>) {
      for (const table of ['comments', 'favorites', 'article_tags', 'tags', 'articles', 'follows', 'users']) {
        await db.schema.dropTable(table).execute();
      }
    },
  };
}
